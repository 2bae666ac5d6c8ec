"""rbcd: random binning features with fast parallel solvers.

Random binning (Rahimi & Recht 2007; Wu et al. KDD 2016) approximates the
Laplacian kernel k(x, y) = exp(-||x - y||_1 / sigma) by a very sparse feature
map with exactly ``n_grids`` non-zeros per row. rbcd builds that map with
multi-threaded Cython kernels and solves the resulting linear problems by
parallel randomized coordinate descent or preconditioned conjugate gradient.

Quick start (scikit-learn estimators; the defaults choose the grids, sigma and the
penalty from the data)::

    import rbcd
    clf = rbcd.RBClassifier(random_state=0).fit(X_train, y_train)
    clf.predict(X_test); clf.predict_proba(X_test)
    reg = rbcd.RBRegressor(random_state=0).fit(X_train, y_train)

    Z = rbcd.RandomBinning(n_grids=256, random_state=0).fit_transform(X)  # the features
    rbcd.CDClassifier(loss="logistic").fit(Z, y)   # any linear solver on them

``python -m rbcd demo`` runs an example end to end; ``rbcd.show_config()`` says how rbcd was
built and which threads it uses; README.md and docs/ hold the rest.

Layout, one stage of the pipeline per subpackage (nothing below imports anything above):

- ``rbcd.binning``: RandomBinning, the grids, bins, exact and hashed columns, Z;
- ``rbcd.solvers``: coordinate descent (``cd``) and conjugate gradient (``cg``) on Z;
- ``rbcd.models``: RBClassifier / RBRegressor, binning + a solver in one estimator;
- ``rbcd.model_selection``: RBClassifierCV / RBRegressorCV, their cross-validated forms;
- ``rbcd.dask``: the same estimators on Dask arrays (``pip install '.[dask]'`` in a clone);
- ``rbcd.related``: the other papers' systems (random Fourier features, sparse random
  features, doubly stochastic kernel learning);
- ``rbcd.cli``: the command line (``python -m rbcd``).

Public names are imported lazily, so ``import rbcd`` is cheap.
"""
import importlib

from ._openmp_env import set_wait_policy as _set_wait_policy

__version__ = "0.1.0"

# before any compiled module loads libgomp (rbcd._openmp_env: the busy-machine rule)
_WAIT_POLICY = _set_wait_policy()

_PUBLIC = {
    "RandomBinning": "binning",
    "CDRegressor": "solvers",
    "CDClassifier": "solvers",
    "cd_path": "solvers",
    "alpha_max": "solvers",
    "RidgeCG": "solvers",
    "RidgeCGClassifier": "solvers",
    "RBRegressor": "models",
    "RBClassifier": "models",
    "RBRegressorCV": "model_selection",
    "RBClassifierCV": "model_selection",
    "median_l1_distance": "binning",
    "DegenerateBinningWarning": "binning",
    "RandomFourier": "related",
    "SparseRandomFeatures": "related",
    "DoublyStochasticKernelClassifier": "related",
}

__all__ = sorted(_PUBLIC) + ["show_config"]


def __getattr__(name):
    if name in _PUBLIC:
        module = importlib.import_module("." + _PUBLIC[name], __name__)
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rbcd' has no attribute {name!r}")


def __dir__():
    return __all__ + ["__version__"]


def show_config(file=None, as_dict=False):
    """Print how rbcd was built and what it will use here: OpenMP and the default thread
    count, the SIMD path of the binning kernels (AVX-512 or scalar, chosen at run time),
    how coordinate descent's Hogwild mode adds (hardware transactions or atomic adds), and
    the versions of its dependencies.

    Parameters
    ----------
    file : writable text stream or None, default None
        Where the text is printed (any object with a ``write`` method, as for
        ``print(file=...)``); None: ``sys.stdout``. Ignored with ``as_dict=True``.
    as_dict : bool, default False
        True: print nothing and return the facts as a dict instead.

    Returns
    -------
    None, so that an interactive session does not echo the text a second time; with
    ``as_dict=True`` a dict with the keys "version", "openmp" (bool), "threads" (the
    default thread count, ``n_jobs=None`` at this moment), "wait_policy" (text: what
    rbcd did about OpenMP's waiting policy at import), "simd" ("avx512" or "scalar"),
    "cd_atomics" ("rtm" or "atomic"), and the versions "numpy", "scipy" and
    "scikit-learn".
    """
    import sys

    import numpy
    import scipy
    import sklearn

    from ._openmp_info import openmp_is_enabled
    from ._threads import effective_n_threads
    from .binning._binning import avx512_cpu
    from .solvers._cd import rtm_available

    omp = openmp_is_enabled()
    info = {"version": __version__, "openmp": omp, "threads": effective_n_threads(None),
            "wait_policy": _WAIT_POLICY,
            "simd": "avx512" if avx512_cpu() else "scalar",
            "cd_atomics": "rtm" if rtm_available() else "atomic",
            "numpy": numpy.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__}
    if as_dict:
        return info
    out = file or sys.stdout
    simd = ("AVX-512 (avx512f + avx512dq, detected at run time)" if info["simd"] == "avx512"
            else "scalar (this CPU lacks AVX-512, or the build has no AVX-512 support)")
    atomics = ("hardware transactions (Intel RTM)" if info["cd_atomics"] == "rtm"
               else "atomic adds")
    print(f"rbcd {__version__}", file=out)
    print(f"  OpenMP:          {'enabled' if omp else 'DISABLED (serial kernels)'}", file=out)
    print(f"  default threads: {info['threads']}", file=out)
    print(f"  OpenMP waiting:  {_WAIT_POLICY}", file=out)
    print(f"  binning SIMD:    {simd}", file=out)
    print(f"  CD Hogwild adds: {atomics}", file=out)
    print(f"  numpy {numpy.__version__}, scipy {scipy.__version__}, scikit-learn "
          f"{sklearn.__version__}", file=out)
