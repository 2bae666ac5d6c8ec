import os

import pytest
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


@pytest.fixture(scope="module")
def client():
    """A local dask.distributed client (2 in-process workers x 1 thread) for the Dask tests
    (tests/test_dask.py has its own, on its cluster helper)."""
    import warnings

    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                           processes=False, dashboard_address=None)
        c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()
