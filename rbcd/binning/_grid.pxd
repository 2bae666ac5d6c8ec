# The one owner of the grid-label layout (docs/design.md, "Parallel coordinate descent";
# RBColumns.grid_labels).
#
# For each grid g of a random binning matrix with n_bins = grid_ptr[g + 1] - grid_ptr[g]
# columns, the grid labels are an array of n_rows entries:
#
#     label[i] = j - grid_ptr[g]   for the column j of grid g that holds row i,
#     label[i] = n_bins            when row i has no entry in grid g (the sentinel).
#
# The array is uint16 while n_bins < LABEL_NARROW_LIMIT, else int32 (a grid needs
# n_bins < LABEL_MAX_BINS). A grid's columns touch disjoint rows (at most one entry per row
# per grid), which is what makes one label per row and grid exact. Kernels receive the R
# arrays as a table of addresses plus a per-grid "wide" flag (label_is_wide) and cast each
# address to the matching label_t.
from libc.stdint cimport int32_t, int64_t, uint16_t

cdef enum:
    LABEL_NARROW_LIMIT = 65536
    LABEL_MAX_BINS = 2147483647     # 2**31 - 1: the int32 sentinel must fit

ctypedef fused label_t:
    uint16_t
    int32_t

# a second, independent fused type, for kernels that read two grids' labels at once
ctypedef fused label2_t:
    uint16_t
    int32_t


cdef inline bint label_is_wide(int64_t n_bins) noexcept nogil:
    """True when a grid of n_bins columns keeps int32 labels (else uint16)."""
    return n_bins >= LABEL_NARROW_LIMIT


cdef inline Py_ssize_t label_itemsize(int64_t n_bins) noexcept nogil:
    """Bytes per label of a grid of n_bins columns."""
    return 4 if label_is_wide(n_bins) else 2


cdef inline str label_typecode(int64_t n_bins):
    """numpy's type code of the labels of a grid of n_bins columns ("u2" or "i4")."""
    return "i4" if label_is_wide(n_bins) else "u2"
