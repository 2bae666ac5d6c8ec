"""asv benchmarks for rbcd (configuration: asv.conf.json at the top of the repository).

    asv machine --yes                                   # once per machine
    asv run --python=same --quick                       # one sample each, installed rbcd,
                                                        #   full sizes, nothing kept
    asv run --python=same --set-commit-hash $(git rev-parse HEAD)   # keep the results
    asv run --python=same --quick --bench binning       # one group (regex on the name)
    asv run                                             # build main's HEAD in .asv/env
    asv publish                                         # HTML in .asv/html
    RBCD_ASV_SMOKE=1 asv run --python=same --quick      # every benchmark at N / 100 (check only)

Run them on a quiet machine: with other work on the same cores, OpenMP threads wait on
each other and the 2-thread numbers (above all the grid mode, one parallel region per
grid) say nothing. A full ``asv run`` takes roughly 15-25 minutes on 2 cores; the big RB
matrices are built once per run by ``setup_cache``.

Modules: ``binning`` (RandomBinning fit/transform, column structure), ``cd`` (one epoch of
each coordinate descent mode), ``cg`` (RidgeCG with and without Jacobi), ``end_to_end``
(RBClassifier fit, test accuracy, 2-thread speedups). Shared data and helpers are in
``common``. Every benchmark fits within a minute in its default profile on a 2-core machine.
"""
