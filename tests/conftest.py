import os

from hypothesis import HealthCheck, settings

# CI=true loads hypothesis' own "ci" profile (derandomized, no deadline); we register
# ours on top so the whole suite stays within a few minutes with bounded examples.
settings.register_profile(
    "rbcd-ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "rbcd-dev",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# a soak run for maintainers (RBCD_HYPOTHESIS_PROFILE=rbcd-deep): ten times the examples
settings.register_profile(
    "rbcd-deep",
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("RBCD_HYPOTHESIS_PROFILE", "rbcd-ci" if os.environ.get("CI") else "rbcd-dev"))
