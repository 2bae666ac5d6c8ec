"""Which kernel path the coordinate descent solver takes, and how tests force one.

Paths follow from the data and the CPU: the streamed grid step where the stored values are
constant and grid labels exist; per-grid parallel updates from ``grid_par_min`` stored
entries per grid; block partial sums while they need at most ``stream_max_partials * N``
doubles; Hogwild adds in hardware transactions (Intel RTM) where the CPU has them, else
per-entry atomic adds. Every alternative gives the same iterates (grid mode) or loses no
update (Hogwild).

Tests (and benchmarks) force a path for the fits inside a ``with forced_paths(...)``
block; the choice is read once per fit and handed to the kernels as arguments. Nothing
here is a module-level switch: the default is the immutable ``CDPaths()``.
"""
import contextlib
import contextvars
import dataclasses

__all__ = ["AUTO_GRID_MIN_ENTRIES", "CDPaths", "GRID_PAR_MIN_ENTRIES",
           "SERIAL_STREAM_MIN_ROWS", "SERIAL_STREAM_MIN_ROWS_CLASSIFICATION", "current_paths",
           "forced_paths"]

#: A grid's update is split across threads only from this many stored entries in the grid;
#: smaller grids run on one thread. In random binning training data every grid holds exactly
#: one entry per row, so this is a threshold on N. On the project's machine (Intel Xeon,
#: 2 vCPUs; docs/benchmarks/cd.md) splitting every grid gave 0.40x at N = 10^4 (d = 8,
#: R = 32) and 1.82x at N = 10^5 on 2 threads. (An earlier 2^18 had been measured while a
#: BLAS thread, woken by the fit itself, spun on the second core.) Grids of about one row per
#: bin take their bins' own steps, split in chunks of thousands of bins (rbcd.solvers._cd).
#: The grid step's iterates are the same for any thread count, so this threshold changes
#: speed only, never results.
GRID_PAR_MIN_ENTRIES = 1 << 15
#: ``parallel="auto"`` picks grid mode (else serial) when the grid structure is given and its
#: grids hold at least this many stored entries on average. A property of the problem, never
#: of the machine, so that the chosen mode, and the coefficients, are the same everywhere.
AUTO_GRID_MIN_ENTRIES = 32768
#: Serial cyclic CD on RB columns (grid after grid) takes the streamed grid step from this
#: many rows (squared loss); below it the coordinates' own steps, whose rows fit in cache
#: there. d = 8, R = 32, sigma = 1, paired in one process on a 2-vCPU AMD EPYC (Zen 1, no
#: RTM), epochs of the streamed step / the coordinates' own steps (with their grouped adds,
#: rbcd/src/cd_kernels.h): 265 / 205 us at N = 4000, 472 / 368 us at 8192, 883 / 703 us at
#: 16384, 1.60 / 1.35 ms at 30000, 3.62 / 3.50 ms at 65536, 5.6 / 5.9 ms at 10^5 and
#: 11.6 / 12.3 ms at 2 x 10^5. (Before the grouped adds the stream led from 2^13 rows on
#: that CPU, and from 2 x 10^4 on a 2-vCPU Intel Xeon.) A property of the problem: the same
#: path on every machine.
SERIAL_STREAM_MIN_ROWS = 1 << 16
#: The same threshold for the classification losses. Their streamed pass moves every row's
#: loss' (a division per row, and the logistic state) where the coordinates' own steps
#: touch only the rows of the bins that moved: at N = 10^4 (d = 8, R = 32, sigma = 1,
#: logistic) the stream took 2.6 ms per epoch against 1.5-1.7 ms on the 2-vCPU AMD EPYC,
#: and it was behind on the Intel Xeon too; from 2 x 10^4 rows it was ahead on the Xeon.
SERIAL_STREAM_MIN_ROWS_CLASSIFICATION = 1 << 14


@dataclasses.dataclass(frozen=True)
class CDPaths:
    """The path choices of one fit.

    grid_stream : bool
        Grid mode (and serial cyclic CD on RB columns) streams over the rows with the grid
        labels when the stored values are constant; False: per-bin column updates.
    serial_stream_min_rows : int
        Serial cyclic CD with the squared loss streams from this many rows. Default
        ``SERIAL_STREAM_MIN_ROWS``.
    serial_stream_min_rows_classification : int
        The same for the classification losses. Default
        ``SERIAL_STREAM_MIN_ROWS_CLASSIFICATION``.
    grid_par_min : int
        A grid is updated on several threads when it holds at least this many stored
        entries (and two or more bins). Default ``GRID_PAR_MIN_ENTRIES``.
    auto_grid_min : int
        The size rule of ``parallel="auto"``. Default ``AUTO_GRID_MIN_ENTRIES``.
    stream_max_partials : float
        The streamed step sums a grid's bins in row-block partial sums while
        n_blocks (n_bins + 1) <= stream_max_partials * N, else the grid's bins take their
        own steps (each on its column; the same bits).
    transactions : {"auto", "off", "abort"}
        Hogwild's adds to the shared state: "auto" uses hardware transactions where the
        CPU has them (else atomic adds); "off" always atomic adds; "abort" runs the
        transaction path with every transaction failing, so that its fallback (redo the
        batch with atomic adds, then stay on them) is exercised on every machine.
    """

    grid_stream: bool = True
    serial_stream_min_rows: int = SERIAL_STREAM_MIN_ROWS
    serial_stream_min_rows_classification: int = SERIAL_STREAM_MIN_ROWS_CLASSIFICATION
    grid_par_min: int = GRID_PAR_MIN_ENTRIES
    auto_grid_min: int = AUTO_GRID_MIN_ENTRIES
    stream_max_partials: float = 2.0
    transactions: str = "auto"

    def __post_init__(self):
        if self.transactions not in ("auto", "off", "abort"):
            raise ValueError(f"transactions must be 'auto', 'off' or 'abort', got "
                             f"{self.transactions!r}")
        if (self.grid_par_min < 0 or self.serial_stream_min_rows < 0
                or self.serial_stream_min_rows_classification < 0
                or not self.stream_max_partials >= 0):
            raise ValueError("grid_par_min, serial_stream_min_rows(_classification) and "
                             "stream_max_partials must be >= 0")


_CURRENT = contextvars.ContextVar("rbcd_cd_paths", default=CDPaths())


def current_paths():
    """The CDPaths in force (the defaults outside ``forced_paths``)."""
    return _CURRENT.get()


@contextlib.contextmanager
def forced_paths(**changes):
    """``with forced_paths(grid_stream=False): est.fit(...)``: fits inside the block take
    the given paths (fields of :class:`CDPaths`); for tests and benchmarks."""
    token = _CURRENT.set(dataclasses.replace(_CURRENT.get(), **changes))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)
