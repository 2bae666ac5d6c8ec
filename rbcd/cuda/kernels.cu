// CUDA kernels of rbcd.cuda (compiled at first use by cupy.RawModule; rbcd/cuda/_ops.py
// launches them and holds the numpy twin of each, which CI runs).
//
// Contracts (docs/gpu.md):
// * rb_grid_keys: the packed key of one single-word grid, bit for bit the CPU's
//   (docs/design.md contract 3: b_j = floor((x_j - u_j) / w_j) in float64 with a true
//   division; CUDA's double division is IEEE round-to-nearest, and there is no
//   multiply to contract into an FMA). Field j, b_j - lo_j, sits at bit shift_j
//   (rbcd.binning._binning.pack_layout). mode 1 (fit): keys[i] = key << row_bits | i, the
//   (key, row) pair as one sortable word (the caller checks that it fits). mode 0
//   (transform): keys[i] = key and inside[i] = 1 iff every b_j lies in [lo_j, hi_j].
//   The caller has checked that every bin fits in int64.
// * rb_zdot: out[i, k0:k0+kc] = value * sum_r W[grid_ptr[r] + labels[r, i], k0:k0+kc]
//   (labels < 0: no entry). One thread per row; labels are grid-major (R, n) so each
//   grid's read is coalesced. kc <= 8.
// * rb_piece_sums: one warp per piece of the grid-sorted (CSC) entries: partial[p, t] =
//   sum_{e in piece p} U[rows[e], k0 + t]. No atomics: each piece is one warp's.
// * rb_segment_sums: out[c, t] = scale * sum_{p in [ptr[c], ptr[c + 1])} V[p, t], one thread
//   per segment (pieces -> columns, or columns -> grids).
// * rb_hist_tdot: Z^T U for the narrow grids (few bins) by streaming the labels and U in
//   row order (both reads coalesced; the CSC path gathers U in bin order instead). One
//   block per (narrow grid s, row chunk c), grid index fastest so that the blocks reading
//   the same rows of U run together (U is then read from L2 once per chunk). Each warp has
//   a private histogram (bins x kc doubles) in shared memory; the lanes of a warp holding
//   the same bin (__match_any_sync) add to it one per round, in lane order, so no atomics
//   and a fixed order of additions: deterministic. The block then sums its warps'
//   histograms in warp order into partial[c, hptr[s] + bin, t].
// * rb_chunk_sums: out[cols[j], k0 + t] = value * sum_c partial[c, j, t], c in order.

#define RB_KMAX 8
#define RB_ZBATCH 8

extern "C" __global__ void rb_grid_keys(
    const double* __restrict__ X, long long n, int d,
    const double* __restrict__ u, const double* __restrict__ w,
    const long long* __restrict__ lo, const long long* __restrict__ hi,
    const long long* __restrict__ shift, int row_bits, int mode,
    unsigned long long* __restrict__ keys, unsigned char* __restrict__ inside)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* x = X + i * (long long)d;
    unsigned long long key = 0ULL;
    int in = 1;
    for (int j = 0; j < d; j++) {
        double q = (x[j] - u[j]) / w[j];
        long long b = (long long)floor(q);
        if (b < lo[j] || b > hi[j]) {
            in = 0;
        } else {
            key |= ((unsigned long long)(b - lo[j])) << shift[j];
        }
    }
    if (mode == 1) {
        keys[i] = (key << row_bits) | (unsigned long long)i;
    } else {
        keys[i] = key;
        inside[i] = (unsigned char)in;
    }
}

extern "C" __global__ void rb_zdot(
    const int* __restrict__ labels, long long n, int R,
    const long long* __restrict__ grid_ptr, const double* __restrict__ W,
    int k, int k0, int kc, double value, double* __restrict__ out)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double acc[RB_KMAX];
#pragma unroll
    for (int t = 0; t < RB_KMAX; t++) acc[t] = 0.0;
    // grids in batches of RB_ZBATCH: the batch's label loads are independent, so they are
    // in flight together (one at a time left the loop latency bound). The additions still
    // run in grid order, so the sums are those of a plain loop over r.
    int r = 0;
    for (; r + RB_ZBATCH <= R; r += RB_ZBATCH) {
        int l[RB_ZBATCH];
#pragma unroll
        for (int q = 0; q < RB_ZBATCH; q++) l[q] = labels[(long long)(r + q) * n + i];
#pragma unroll
        for (int q = 0; q < RB_ZBATCH; q++) {
            if (l[q] < 0) continue;
            const double* wr = W + (grid_ptr[r + q] + (long long)l[q]) * k + k0;
#pragma unroll
            for (int t = 0; t < RB_KMAX; t++) {
                if (t < kc) acc[t] += wr[t];
            }
        }
    }
    for (; r < R; r++) {
        int l = labels[(long long)r * n + i];
        if (l < 0) continue;
        const double* wr = W + (grid_ptr[r] + (long long)l) * k + k0;
#pragma unroll
        for (int t = 0; t < RB_KMAX; t++) {
            if (t < kc) acc[t] += wr[t];
        }
    }
#pragma unroll
    for (int t = 0; t < RB_KMAX; t++) {
        if (t < kc) out[i * k + k0 + t] = value * acc[t];
    }
}

extern "C" __global__ void rb_piece_sums(
    const int* __restrict__ rows, const long long* __restrict__ piece_start,
    const long long* __restrict__ piece_end, long long n_pieces,
    const double* __restrict__ U, int k, int k0, int kc, double* __restrict__ partial)
{
    // blockDim.x is a multiple of 32: a warp leaves together, so the shuffles below
    // always run on full warps
    long long p = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (p >= n_pieces) return;
    double acc[RB_KMAX];
#pragma unroll
    for (int t = 0; t < RB_KMAX; t++) acc[t] = 0.0;
    long long end = piece_end[p];
    for (long long e = piece_start[p] + lane; e < end; e += 32) {
        const double* ur = U + (long long)rows[e] * k + k0;
#pragma unroll
        for (int t = 0; t < RB_KMAX; t++) {
            if (t < kc) acc[t] += ur[t];
        }
    }
#pragma unroll
    for (int t = 0; t < RB_KMAX; t++) {
        for (int off = 16; off > 0; off >>= 1) acc[t] += __shfl_down_sync(0xffffffffu, acc[t], off);
    }
    if (lane == 0) {
#pragma unroll
        for (int t = 0; t < RB_KMAX; t++) {
            if (t < kc) partial[p * k + k0 + t] = acc[t];
        }
    }
}

extern "C" __global__ void rb_segment_sums(
    const double* __restrict__ V, const long long* __restrict__ ptr, long long n_seg,
    int k, double scale, double* __restrict__ out)
{
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_seg) return;
    long long a = ptr[c], b = ptr[c + 1];
    for (int t = 0; t < k; t++) {
        double s = 0.0;
        for (long long p = a; p < b; p++) s += V[p * k + t];
        out[c * k + t] = scale * s;
    }
}

extern "C" __global__ void rb_hist_tdot(
    const int* __restrict__ labels, long long n, long long chunk,
    const int* __restrict__ grids, const long long* __restrict__ hptr, int n_sel,
    long long n_hcols, const double* __restrict__ U, int k, int k0, int kc,
    double* __restrict__ partial)
{
    // launch contract (rbcd/cuda/_ops.py hist_tdot): blockDim.x = 32 * nw (full warps),
    // gridDim.x = n_sel * n_chunks, dynamic shared memory >= nw * max_s(bins_s) * kc
    // doubles; chunk > 0; 1 <= kc <= RB_KMAX; grids[s] < R; hptr (n_sel + 1,) increasing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    extern __shared__ double hist[];
    const int nw = blockDim.x >> 5;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const long long blk = blockIdx.x;
    const int s = (int)(blk % n_sel);          // narrow grid (fastest: shares U's rows)
    const long long c = blk / n_sel;           // row chunk
    const long long col0 = hptr[s];
    const int width = (int)(hptr[s + 1] - col0) * kc;   // doubles of one warp histogram
    for (int e = threadIdx.x; e < nw * width; e += blockDim.x) hist[e] = 0.0;
    __syncthreads();
    double* h = hist + warp * width;
    const int* lab = labels + (long long)grids[s] * n;
    const long long a = c * chunk;
    const long long b = (a + chunk < n) ? a + chunk : n;
    const unsigned lower = (1u << lane) - 1u;  // the lanes below this one
    // base is the same on every lane of a warp, so whole warps run each iteration and the
    // *_sync calls below see all 32 lanes
    for (long long base = a + 32LL * warp; base < b; base += blockDim.x) {
        const long long i = base + lane;
        const int l = (i < b) ? lab[i] : -1;   // -1: past the chunk, or no entry
        double v[RB_KMAX];
#pragma unroll
        for (int t = 0; t < RB_KMAX; t++) {
            v[t] = (l >= 0 && t < kc) ? U[i * k + k0 + t] : 0.0;
        }
        const unsigned peers = __match_any_sync(0xffffffffu, l);
        const int rank = (l >= 0) ? __popc(peers & lower) : -1;  // place among its bin's lanes
        // round q: the lane of rank q of every bin adds (distinct bins: no conflict)
        for (int q = 0; __any_sync(0xffffffffu, rank >= q); q++) {
            if (rank == q) {
                double* hb = h + l * kc;
#pragma unroll
                for (int t = 0; t < RB_KMAX; t++) {
                    if (t < kc) hb[t] += v[t];
                }
            }
            __syncwarp();
        }
    }
    __syncthreads();
    double* out = partial + (c * n_hcols + col0) * kc;
    for (int e = threadIdx.x; e < width; e += blockDim.x) {
        double acc = 0.0;
        for (int w = 0; w < nw; w++) acc += hist[w * width + e];
        out[e] = acc;
    }
#else
    __trap();  // needs __match_any_sync (compute capability 7.0); the caller checks
#endif
}

extern "C" __global__ void rb_chunk_sums(
    const double* __restrict__ partial, long long n_chunks, long long n_hcols, int kc,
    const long long* __restrict__ cols, int k, int k0, double value, double* __restrict__ out)
{
    // one thread per (histogram column j, target t); the chunks are added in order
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long m = n_hcols * kc;
    if (e >= m) return;
    double acc = 0.0;
#pragma unroll 4
    for (long long c = 0; c < n_chunks; c++) acc += partial[c * m + e];
    long long j = e / kc;
    int t = (int)(e - j * kc);
    out[cols[j] * k + k0 + t] = value * acc;
}
