"""asv benchmarks for rbcd (configuration: asv.conf.json at the top of the repository).

    asv machine --yes                                   # once per machine
    asv run --python=same --quick                       # smoke run, installed rbcd, nothing kept
    asv run --python=same --set-commit-hash $(git rev-parse HEAD)   # keep the results
    asv run --python=same --quick --bench Binning       # one group (regex on the name)
    asv run                                             # build main's HEAD in .asv/env
    asv publish                                         # HTML in .asv/html
    RBCD_ASV_SMOKE=1 asv run --python=same --quick      # every benchmark at N / 100 (check only)

Modules: ``binning`` (RandomBinning fit/transform, column structure), ``cd`` (one epoch of
each coordinate descent mode), ``cg`` (RidgeCG with and without Jacobi), ``end_to_end``
(RBClassifier fit, test accuracy, 2-thread speedups). Shared data and helpers are in
``common``. Every benchmark fits within a minute in its default profile on a 2-core machine.
"""
