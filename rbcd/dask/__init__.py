"""rbcd on Dask: the same estimators on data partitioned by rows (issue 13, docs/dask.md).

    from distributed import Client
    import rbcd.dask as rd
    client = Client()                       # or Client("tcp://scheduler:8786")
    model = rd.RBRegressor(solver="cg").fit(X, y)    # X: dask array / DataFrame / numpy / scipy sparse
    pred = model.predict(X_new)             # a dask array, computed blockwise on the workers

Modules, one stage each as in rbcd: ``_data`` (input partitions, the Client, reductions in
partition order), ``binning`` (RandomBinning), ``cg`` (RidgeCG), ``cd`` (CDRegressor,
CDClassifier), ``models`` (RBRegressor, RBClassifier).
"""
import importlib

_PUBLIC = {
    "RandomBinning": "binning",
    "PartitionedColumns": "binning",
    "RidgeCG": "cg",
    "RidgeCGClassifier": "cg",
    "CDRegressor": "cd",
    "CDClassifier": "cd",
    "RBRegressor": "models",
    "RBClassifier": "models",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        value = getattr(importlib.import_module("." + _PUBLIC[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rbcd.dask' has no attribute {name!r}")


def __dir__():
    return list(__all__)
