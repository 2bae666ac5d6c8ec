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
//   grid's read is coalesced; the labels of RB_ZBATCH grids are loaded together, the
//   additions run in grid order. kc <= 8.
// * rb_piece_sums: one warp per piece of the grid-sorted (CSC) entries: partial[p, t] =
//   sum_{e in piece p} U[rows[e], k0 + t]. No atomics: each piece is one warp's. Warp w
//   takes piece order[w] (a permutation: the pieces by their first row, so that the warps
//   in flight together read a narrow band of U's rows, which the L2 cache holds, instead
//   of all of U for the columns of one grid); the sums do not depend on it.
// * rb_segment_sums: out[c, t] = scale * sum_{p in [ptr[c], ptr[c + 1])} V[p, t], one thread
//   per segment (pieces -> columns, or columns -> grids).
// * rb_seg_flags, rb_seg_starts: the segments of equal keys in sorted (key << row_bits |
//   row) words s (docs/design.md contract 4; the caller: rbcd.cuda.binning._segment_ids and
//   _number_batch, below). rb_seg_flags: flags[p] = 1 where a segment of equal keys starts
//   (p = 0, or s[p] >> row_bits != s[p - 1] >> row_bits), else 0. rb_seg_starts:
//   start[seg[p]] = p where flags[p] (seg = inclusive scan of flags - 1).
// * rb_column_extremes: block b takes rows [b * rows_per_block, (b + 1) * rows_per_block) of
//   the C-contiguous (n, d) X and writes bmin[b, j] / bmax[b, j], the least and largest
//   entry of column j over those rows (+inf / -inf for a block without rows), and sets
//   *bad = 1 if any of those entries is not finite (every writer writes 1). Minima and
//   maxima do not depend on the order of the comparisons: the result is exact. Where
//   d <= blockDim.x the block reads blockDim.x / d whole rows at a time, each thread one
//   column (consecutive threads, consecutive addresses); wider X: each thread a set of
//   columns, row after row.

#define RB_KMAX 8
#define RB_ZBATCH 8
#define RB_KEYS 8

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
        long long b = (long long)floor((x[j] - u[j]) / w[j]);
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
    const long long* __restrict__ piece_end, const long long* __restrict__ order,
    long long n_pieces, const double* __restrict__ U, int k, int k0, int kc,
    double* __restrict__ partial)
{
    // blockDim.x is a multiple of 32: a warp leaves together, so the shuffles below
    // always run on full warps
    long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (w >= n_pieces) return;
    long long p = order[w];
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

extern "C" __global__ void rb_seg_flags(
    const unsigned long long* __restrict__ s, long long n, int row_bits, int* __restrict__ flags)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    flags[p] = (p == 0 || (s[p] >> row_bits) != (s[p - 1] >> row_bits)) ? 1 : 0;
}

extern "C" __global__ void rb_seg_starts(
    const int* __restrict__ flags, const int* __restrict__ seg, long long n,
    long long* __restrict__ start)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    if (flags[p]) start[seg[p]] = p;
}

extern "C" __global__ void rb_column_extremes(
    const double* __restrict__ X, long long n, int d, long long rows_per_block,
    double* __restrict__ bmin, double* __restrict__ bmax, int* __restrict__ bad)
{
    // (comparisons, not fmin/fmax: a NaN never replaces a value, and is flagged by the
    // finiteness test, v - v == 0 exactly when v is finite)
    __shared__ double smin[1024];
    __shared__ double smax[1024];
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    long long r0 = (long long)blockIdx.x * rows_per_block;
    long long r1 = r0 + rows_per_block < n ? r0 + rows_per_block : n;
    int t = threadIdx.x, B = blockDim.x;
    int finite = 1;
    if (d <= B) {
        int per = B / d;            // rows read together
        int j = t % d, s = t / d;
        double lo = inf, hi = -inf;
        if (s < per) {
            for (long long i = r0 + s; i < r1; i += per) {
                double v = X[i * d + j];
                if (!(v - v == 0.0)) finite = 0;
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
        smin[t] = lo;
        smax[t] = hi;
        __syncthreads();
        if (t < d) {
            for (int q = 1; q < per; q++) {
                double a = smin[q * d + t], b = smax[q * d + t];
                lo = a < lo ? a : lo;
                hi = b > hi ? b : hi;
            }
            bmin[(long long)blockIdx.x * d + t] = lo;
            bmax[(long long)blockIdx.x * d + t] = hi;
        }
    } else {
        for (int j = t; j < d; j += B) {
            double lo = inf, hi = -inf;
            for (long long i = r0; i < r1; i++) {
                double v = X[i * d + j];
                if (!(v - v == 0.0)) finite = 0;
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            bmin[(long long)blockIdx.x * d + j] = lo;
            bmax[(long long)blockIdx.x * d + j] = hi;
        }
    }
    if (!finite) *bad = 1;
}

// ------------------------------------------------------------------------------ CG steps
// One block-PCG iteration's work on the (D, k) vectors, after the products (rbcd.cuda.cg):
// rb_cg_q, rb_cg_step, rb_cg_dir, rb_cg_p, four launches per RB_KMAX targets instead of
// about forty array operations. Every kernel takes targets [k0, k0 + kc), kc <= RB_KMAX,
// of row-major (D, k) arrays, columns j in a grid-stride loop (at most CG_MAX_BLOCKS of
// _ops.py blocks), blockDim.x a multiple of 32, and writes per-block sums partial[b, t]
// (b = blockIdx.x, (nb, k)), summed in a fixed order (each thread's columns in order, warp
// shuffles, then the warps in order): no atomics, the same bits on every run. A kernel
// that needs a total of the previous kernel's partials sums them itself, in every block in
// the same order (rb_totals), so every block sees the same total; the cap on the blocks
// keeps that redundant work (nb partials per block) small for any D.
//   rb_col_parts: partial = sums of w_i A[i, t] over the rows i of (m, k) A (w_i = 1
//               where !has_w): the products' dot products zbar . P (m = D) and 1 . T (m =
//               N), whose totals the next kernel sums (no reduction of the array library,
//               which allocates temporary storage: a CUDA graph replays these).
//   rb_center_rows: T = (T - c_t) s_i, c = total of partial_c (where has_c; the centred
//               product Z P - 1 zbar^T P) and s the sample weights (where has_s).
//   rb_cg_q:    Q = (Q0 - zbar_j sumT_t + alpha_t P) keep_j (zbar term where has_zbar,
//               sumT the total of partial_T); partial = sums of P Q.
//   rb_cg_step: pq = total of partial_pq; ok_t = pq > 0; step = rz / pq where act_t and
//               ok_t, else 0; where act_t: X += step P, Rr -= step Q (an inactive target's
//               X and Rr are not written); Zr = Rr minv (Rr where !use_minv); partial =
//               sums of Rr Rr; block 0 writes ok_t to summary[1, t].
//   rb_cg_dir:  the grid projection and the constant columns: Zr = (Zr - m_g(j),t) keep_j,
//               m_g,t = gsum[g, t] inv_g (mode 1, with an intercept), minus inv_g c_t with
//               c_t = inv_total sum_g gsum[g, t] inv_g (mode 2, without); mode 0: no
//               projection. partial = sums of Rr Zr.
//   rb_cg_p:    rz_new = total of partial_rz, rr = total of partial_rr; beta = rz_new / rz
//               where rz > 0, else 0; P = Zr + beta P where act_t; block 0 writes
//               rz_out_t = act_t ? rz_new : rz_t and the stopping decision: where act_t,
//               summary[0, t] = rn = sqrt(rr), counts[0, t] += 1 (iterations run) and
//               counts[1, t] = 1 if !(summary[1, t] > 0) (breakdown, rb_cg_step's ok_t);
//               act_out_t = act_t && ok_t && !(rn <= thresh_t) (the next iteration's act).
//               rz and rz_out, act and act_out are different arrays (every block reads rz
//               and act; only block 0 writes rz_out and act_out).

// * rb_cg_setup: the CG set-up's column statistics on a GridLayout (rbcd.cuda._ops.cg_setup,
//   twin cg_columns), one thread per column j of ZtU (D, 1 + k) = Z^T [s, s Yc]: colsum =
//   ZtU[j, 0], colsq = colsum value; with an intercept zbar_j = colsum / S, diag = colsq -
//   (S zbar_j) zbar_j, constant (keep_j = 0) where max(diag, 0) <= tiny colsq and colsq >
//   0; B[j, t] = (ZtU[j, 1 + t] - zbar_j csY_t) keep_j; minv[j, t] = 1 / (diag + alpha_t)
//   where that sum is positive, else 1 (use_diag; diag 0 on a constant column). Every
//   operation rounds on its own (the _rn intrinsics: no FMA contraction), in the twin's
//   order, so the decision and the values are the twin's bit for bit.

extern "C" __global__ void rb_cg_setup(
    const double* __restrict__ ZtU, long long D, int k, double value,
    const double* __restrict__ S, int fit_intercept, double tiny,
    const double* __restrict__ csY, const double* __restrict__ alpha, int use_diag,
    double* __restrict__ zbar, double* __restrict__ keep, double* __restrict__ B,
    double* __restrict__ minv)
{
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= D) return;
    const double* row = ZtU + j * (long long)(k + 1);
    const double colsum = row[0];
    const double colsq = __dmul_rn(colsum, value);
    double zb = 0.0, diag = colsq;
    if (fit_intercept) {
        zb = __ddiv_rn(colsum, S[0]);
        diag = __dsub_rn(colsq, __dmul_rn(__dmul_rn(S[0], zb), zb));
    }
    if (!(diag >= 0.0) && diag == diag) diag = 0.0;     // maximum(diag, 0); NaN stays
    const int flat = fit_intercept && diag <= __dmul_rn(tiny, colsq) && colsq > 0.0;
    const double kp = flat ? 0.0 : 1.0;
    if (flat) diag = 0.0;
    if (fit_intercept) zbar[j] = zb;
    keep[j] = kp;
    for (int t = 0; t < k; t++) {
        double b = row[1 + t];
        if (fit_intercept) b = __dsub_rn(b, __dmul_rn(zb, csY[t]));
        B[j * k + t] = __dmul_rn(b, kp);
        if (use_diag) {
            const double dd = __dadd_rn(diag, alpha[t]);
            minv[j * k + t] = dd > 0.0 ? __ddiv_rn(1.0, dd) : 1.0;
        }
    }
}

// sum of v over the block, returned to thread 0 (every thread must call it)
__device__ double rb_block_sum(double v, double* sh)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double s = 0.0;
    if (threadIdx.x == 0) {
        for (int q = 0; q < (int)(blockDim.x >> 5); q++) s += sh[q];
    }
    __syncthreads();
    return s;
}

// tot[t] = sum over b of partial[b, k0 + t], t < kc, in shared memory for the whole block
__device__ void rb_totals(const double* __restrict__ partial, int nb, int k, int k0, int kc,
                          double* tot, double* sh)
{
    for (int t = 0; t < kc; t++) {
        double v = 0.0;
        for (int b = threadIdx.x; b < nb; b += blockDim.x) v += partial[(long long)b * k + k0 + t];
        v = rb_block_sum(v, sh);
        if (threadIdx.x == 0) tot[t] = v;
    }
    __syncthreads();
}

extern "C" __global__ void rb_col_parts(
    const double* __restrict__ A, const double* __restrict__ w, int has_w, long long m,
    int k, int k0, int kc, double* __restrict__ partial)
{
    __shared__ double sh[32];
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (int t = k0; t < k0 + kc; t++) {
        double v = 0.0;
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride)
            v += has_w ? w[i] * A[i * k + t] : A[i * k + t];
        v = rb_block_sum(v, sh);
        if (threadIdx.x == 0) partial[(long long)blockIdx.x * k + t] = v;
    }
}

extern "C" __global__ void rb_center_rows(
    double* __restrict__ T, const double* __restrict__ partial_c, int nb, int has_c,
    const double* __restrict__ s, int has_s, long long n, int k, int k0, int kc)
{
    __shared__ double sh[32];
    __shared__ double c[RB_KMAX];
    if (has_c) rb_totals(partial_c, nb, k, k0, kc, c, sh);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        for (int t = 0; t < kc; t++) {
            long long e = i * k + k0 + t;
            double v = T[e];
            if (has_c) v -= c[t];
            if (has_s) v *= s[i];
            T[e] = v;
        }
    }
}

extern "C" __global__ void rb_cg_q(
    double* __restrict__ Q, const double* __restrict__ zbar, int has_zbar,
    const double* __restrict__ partial_T, int nb_T, const double* __restrict__ alpha,
    const double* __restrict__ P, const double* __restrict__ keep,
    long long D, int k, int k0, int kc, double* __restrict__ partial)
{
    __shared__ double sh[32];
    __shared__ double sumT[RB_KMAX];
    if (has_zbar) rb_totals(partial_T, nb_T, k, k0, kc, sumT, sh);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (int t = k0; t < k0 + kc; t++) {
        double v = 0.0;
        for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < D; j += stride) {
            long long e = j * k + t;
            double q = Q[e];
            if (has_zbar) q -= zbar[j] * sumT[t - k0];
            q = (q + alpha[t] * P[e]) * keep[j];
            Q[e] = q;
            v += P[e] * q;
        }
        v = rb_block_sum(v, sh);
        if (threadIdx.x == 0) partial[(long long)blockIdx.x * k + t] = v;
    }
}

extern "C" __global__ void rb_cg_step(
    const double* __restrict__ partial_pq, int nb, const double* __restrict__ rz,
    const int* __restrict__ act, const double* __restrict__ P, const double* __restrict__ Q,
    double* __restrict__ X, double* __restrict__ Rr, const double* __restrict__ minv,
    int use_minv, long long D, int k, int k0, int kc, double* __restrict__ Zr,
    double* __restrict__ partial, double* __restrict__ summary)
{
    __shared__ double sh[32];
    __shared__ double pq[RB_KMAX];
    rb_totals(partial_pq, nb, k, k0, kc, pq, sh);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (int c = 0; c < kc; c++) {
        int t = k0 + c;
        int ok = pq[c] > 0.0;
        int a = act[t];
        double step = (a && ok) ? rz[t] / pq[c] : 0.0;
        double v = 0.0;
        for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < D; j += stride) {
            long long e = j * k + t;
            double r;
            if (a) {
                X[e] += step * P[e];
                r = Rr[e] - step * Q[e];
                Rr[e] = r;
            } else {
                r = Rr[e];
            }
            Zr[e] = use_minv ? r * minv[e] : r;
            v += r * r;
        }
        v = rb_block_sum(v, sh);
        if (threadIdx.x == 0) {
            partial[(long long)blockIdx.x * k + t] = v;
            if (blockIdx.x == 0) summary[k + t] = ok ? 1.0 : 0.0;
        }
    }
}

extern "C" __global__ void rb_cg_dir(
    double* __restrict__ Zr, const double* __restrict__ Rr, const double* __restrict__ keep,
    const long long* __restrict__ grid_of_col, const double* __restrict__ gsum,
    const double* __restrict__ inv_sizes, int R, int mode, double inv_total,
    long long D, int k, int k0, int kc, double* __restrict__ partial)
{
    __shared__ double sh[32];
    __shared__ double corr[RB_KMAX];
    if (mode == 2) {  // c_t, in every block alike
        for (int c = 0; c < kc; c++) {
            double v = 0.0;
            for (int g = threadIdx.x; g < R; g += blockDim.x) v += gsum[(long long)g * k + k0 + c] * inv_sizes[g];
            v = rb_block_sum(v, sh);
            if (threadIdx.x == 0) corr[c] = v * inv_total;
        }
        __syncthreads();
    }
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (int c = 0; c < kc; c++) {
        int t = k0 + c;
        double v = 0.0;
        for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < D; j += stride) {
            long long e = j * k + t;
            double z = Zr[e];
            if (mode != 0) {
                long long g = grid_of_col[j];
                double m = gsum[g * k + t] * inv_sizes[g];
                if (mode == 2) m -= inv_sizes[g] * corr[c];
                z -= m;
            }
            z *= keep[j];
            Zr[e] = z;
            v += Rr[e] * z;
        }
        v = rb_block_sum(v, sh);
        if (threadIdx.x == 0) partial[(long long)blockIdx.x * k + t] = v;
    }
}

extern "C" __global__ void rb_cg_p(
    const double* __restrict__ partial_rz, const double* __restrict__ partial_rr, int nb,
    const double* __restrict__ rz, const int* __restrict__ act,
    const double* __restrict__ Zr, double* __restrict__ P, long long D, int k, int k0, int kc,
    double* __restrict__ rz_out, double* __restrict__ summary,
    const double* __restrict__ thresh, int* __restrict__ act_out, int* __restrict__ counts)
{
    __shared__ double sh[32];
    __shared__ double rzn[RB_KMAX];
    __shared__ double rr[RB_KMAX];
    rb_totals(partial_rz, nb, k, k0, kc, rzn, sh);
    rb_totals(partial_rr, nb, k, k0, kc, rr, sh);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (int c = 0; c < kc; c++) {
        int t = k0 + c;
        if (!act[t]) continue;
        double beta = rz[t] > 0.0 ? rzn[c] / rz[t] : 0.0;
        for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < D; j += stride) {
            long long e = j * k + t;
            P[e] = Zr[e] + beta * P[e];
        }
    }
    if (blockIdx.x == 0 && threadIdx.x < kc) {
        int c = threadIdx.x, t = k0 + c;
        int a = act[t];
        double rn = sqrt(rr[c]);
        int ok = summary[k + t] > 0.0;   // rb_cg_step's ok_t of this iteration
        rz_out[t] = a ? rzn[c] : rz[t];
        if (a) {
            summary[t] = rn;
            counts[t] += 1;
            if (!ok) counts[k + t] = 1;
        }
        act_out[t] = (a && ok && !(rn <= thresh[t])) ? 1 : 0;
    }
}

// ------------------------------------------------------------------------------ batches
// A batch of G consecutive one-word grids numbered together (rbcd.cuda.binning, where
// rows are few):
// * rb_batch_keys: words[q n + i] = q << tag_shift | key_q(i) << row_bits | i for grid
//   q < G of the batch (u, w, lo, shift: the batch's (G, d) rows); tag_shift < 0: no q
//   (grids sorted one by one). key_q as rb_grid_keys computes it in a fit (the same floor
//   of the same true division, bit for bit; a fit's bins all lie in [lo, hi]).
//   One thread per row, all G grids: the row is read from memory once.
// * rb_batch_keys32: the narrow words of a batch whose keys and rows fit 32 bits
//   (rbcd.cuda.binning._narrow): words[q n + i] = (base[q] + key_q(i)) << row_bits | i, base
//   the running sum of the grids' key ranges (2^top_bits), so that one 32-bit sort (half
//   the passes and bytes of a 64-bit one) orders the batch by (grid, key, row).
// * rb_widen_batch: the m sorted narrow words s back to rb_batch_keys' wide ones, q <<
//   (key_bits + row_bits) | key << row_bits | row, q the last grid with base[q] <= s[p] >>
//   row_bits (the order is the same: both order by (q, key, row)).
// * rb_seg_heads: one thread per segment b of the batch's m = G n sorted words s (a grid
//   sorted alone: G = 1, its words without a grid on top): its first word h = s[start[b]]
//   holds its smallest row (the words are sorted by (grid, key, row)), grid g = h >>
//   (key_bits + row_bits) (0 where that shift is 64) and key (h >> row_bits) & (2^key_bits
//   - 1). Writes order_key[b] = g n + row (the columns' order: grid after grid, by first
//   appearance within a grid: contract 4), g_of_seg[b], key[b] and length[b] (the next
//   segment's start, or m, less its own).
// * rb_seg_order: one thread per column t, order = the segments sorted by order_key:
//   segment b = order[t] becomes column t of the batch, rank[b] = t, counts[t] =
//   length[b], keys[t] = key[b]; the first column of each grid g writes seg_off[g] = t
//   and the last one seg_off[G] = n_seg (every grid of a batch has at least one segment,
//   as it has every row).
// * rb_number_batch: position p holds row i of segment b = seg[p] (grid g = g_of_seg[b],
//   column rank[b] of the batch, local id rank[b] - seg_off[g] in its grid): labels[g n +
//   i] = that local id, and i goes to rows[col_ptr[rank[b]] + p - start[b]] (within a
//   segment the rows increase, as s is sorted). Each position writes its own entries: no
//   atomics, no order dependence.
// keys of the row x in grids g0 .. g0 + gn - 1 (gn <= RB_KEYS; u, w, lo, hi, shift: (grids,
// d) rows), column after column, so that x_j is loaded once for them (a warp's load of x_j
// touches 32 rows' cache lines: loaded once per grid, those loads were the key kernels'
// cost). key[c] packs b_j - lo_j at shift_j with rb_grid_keys' arithmetic; hi == NULL (a
// fit: every bin in range) checks nothing, else in[c] = 0 where some b_j lies outside
// [lo_j, hi_j] (its field left out). Grids with use != NULL and !use[g] are skipped.
__device__ void rb_row_keys(
    const double* __restrict__ x, int d, int g0, int gn, const unsigned char* __restrict__ use,
    const double* __restrict__ u, const double* __restrict__ w,
    const long long* __restrict__ lo, const long long* __restrict__ hi,
    const long long* __restrict__ shift, unsigned long long* key, int* in)
{
#pragma unroll
    for (int c = 0; c < RB_KEYS; c++) {
        key[c] = 0ULL;
        in[c] = c < gn && (use == NULL || use[g0 + c]);
    }
    for (int j = 0; j < d; j++) {
        const double xj = x[j];
#pragma unroll
        for (int c = 0; c < RB_KEYS; c++) {
            if (c < gn && (use == NULL || use[g0 + c])) {
                const long long e = (long long)(g0 + c) * d + j;
                long long b = (long long)floor((xj - u[e]) / w[e]);
                if (hi != NULL && (b < lo[e] || b > hi[e])) {
                    in[c] = 0;
                } else {
                    key[c] |= ((unsigned long long)(b - lo[e])) << shift[e];
                }
            }
        }
    }
}

// one row's words of a batch (rb_batch_keys, rb_batch_keys32): base == NULL, the wide
// words tag | key << row_bits | i (tag = q << tag_shift, none where tag_shift < 0); else
// the narrow ones (base[q] + key) << row_bits | i, stored as W (the caller has checked
// that they fit it)
template <typename W>
__device__ void rb_batch_row(
    const double* __restrict__ X, long long n, int d, int G,
    const double* __restrict__ u, const double* __restrict__ w,
    const long long* __restrict__ lo, const long long* __restrict__ shift, int row_bits,
    int tag_shift, const long long* __restrict__ base, W* __restrict__ words)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* x = X + i * (long long)d;
    for (int q0 = 0; q0 < G; q0 += RB_KEYS) {     // RB_KEYS grids at a time (rb_row_keys)
        const int qn = G - q0 < RB_KEYS ? G - q0 : RB_KEYS;
        unsigned long long key[RB_KEYS];
        int in[RB_KEYS];
        rb_row_keys(x, d, q0, qn, NULL, u, w, lo, NULL, shift, key, in);
#pragma unroll
        for (int c = 0; c < RB_KEYS; c++) {
            if (c < qn) {
                const int q = q0 + c;
                unsigned long long v;
                if (base != NULL)
                    v = ((unsigned long long)base[q] + key[c]) << row_bits;
                else
                    v = (tag_shift >= 0 ? (unsigned long long)q << tag_shift : 0ULL)
                        | (key[c] << row_bits);
                words[(long long)q * n + i] = (W)(v | (unsigned long long)i);
            }
        }
    }
}

extern "C" __global__ void rb_batch_keys(
    const double* __restrict__ X, long long n, int d, int G,
    const double* __restrict__ u, const double* __restrict__ w,
    const long long* __restrict__ lo, const long long* __restrict__ shift, int row_bits,
    int tag_shift, unsigned long long* __restrict__ words)
{
    rb_batch_row<unsigned long long>(X, n, d, G, u, w, lo, shift, row_bits, tag_shift,
                                     NULL, words);
}

extern "C" __global__ void rb_batch_keys32(
    const double* __restrict__ X, long long n, int d, int G,
    const double* __restrict__ u, const double* __restrict__ w,
    const long long* __restrict__ lo, const long long* __restrict__ shift, int row_bits,
    const long long* __restrict__ base, unsigned int* __restrict__ words)
{
    rb_batch_row<unsigned int>(X, n, d, G, u, w, lo, shift, row_bits, -1, base, words);
}

extern "C" __global__ void rb_widen_batch(
    const unsigned int* __restrict__ s, long long m, int G, const long long* __restrict__ base,
    int row_bits, int key_bits, unsigned long long* __restrict__ out)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= m) return;
    const unsigned int v = s[p];
    const long long k = (long long)(v >> row_bits);
    int a = 0, z = G - 1;                     // the last q with base[q] <= k (base[0] = 0)
    while (a < z) {
        const int mid = (a + z + 1) >> 1;
        if (base[mid] <= k) a = mid; else z = mid - 1;
    }
    const unsigned long long row = (unsigned long long)(v & ((1u << row_bits) - 1u));
    out[p] = ((unsigned long long)a << (key_bits + row_bits))
             | ((unsigned long long)(k - base[a]) << row_bits) | row;
}

extern "C" __global__ void rb_seg_heads(
    const unsigned long long* __restrict__ s, const long long* __restrict__ start,
    long long n_seg, long long m, long long n, int row_bits, int key_bits,
    long long* __restrict__ order_key, long long* __restrict__ g_of_seg,
    unsigned long long* __restrict__ key, long long* __restrict__ length)
{
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n_seg) return;
    const long long p = start[b];
    const unsigned long long h = s[p];
    const int top = key_bits + row_bits;
    const long long g = top >= 64 ? 0LL : (long long)(h >> top);
    const unsigned long long kmask = key_bits >= 64 ? ~0ULL : ((1ULL << key_bits) - 1ULL);
    order_key[b] = g * n + (long long)(h & ((1ULL << row_bits) - 1ULL));
    g_of_seg[b] = g;
    key[b] = (h >> row_bits) & kmask;
    length[b] = (b + 1 < n_seg ? start[b + 1] : m) - p;
}

extern "C" __global__ void rb_seg_order(
    const long long* __restrict__ order, long long n_seg, int G,
    const long long* __restrict__ g_of_seg, const unsigned long long* __restrict__ key,
    const long long* __restrict__ length, long long* __restrict__ rank,
    long long* __restrict__ counts, unsigned long long* __restrict__ keys,
    long long* __restrict__ seg_off)
{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_seg) return;
    const long long b = order[t];
    const long long g = g_of_seg[b];
    rank[b] = t;
    counts[t] = length[b];
    keys[t] = key[b];
    if (t == 0 || g_of_seg[order[t - 1]] != g) seg_off[g] = t;
    if (t == n_seg - 1) seg_off[G] = n_seg;
}

extern "C" __global__ void rb_number_batch(
    const unsigned long long* __restrict__ s, const int* __restrict__ seg,
    const long long* __restrict__ start, const long long* __restrict__ rank,
    const long long* __restrict__ col_ptr, const long long* __restrict__ g_of_seg,
    const long long* __restrict__ seg_off, long long m, long long n, int row_bits,
    int* __restrict__ labels, int* __restrict__ rows)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= m) return;
    const int b = seg[p];
    const long long i = (long long)(s[p] & ((1ULL << row_bits) - 1ULL));
    const long long g = g_of_seg[b];
    labels[g * n + i] = (int)(rank[b] - seg_off[g]);
    rows[col_ptr[rank[b]] + (p - start[b])] = (int)i;
}

// ------------------------------------------------------------------------------ transform
// * rb_match_keys: the labels of new rows in every one-word grid (single[r] = 1), exactly
//   (docs/design.md contract 6): the key of row i in grid r as rb_grid_keys computes it in
//   transform mode, then a binary search among grid r's fitted keys, sorted:
//   skeys[off[r] .. off[r + 1]) with their local ids sids. labels[r m + i] = the id of the
//   equal fitted key, or -1 where there is none or a bin lies outside [lo_j, hi_j]. One
//   thread per row, all grids (u, w, lo, hi, shift: (R, d)); grids with single[r] = 0 are
//   left to the caller.
extern "C" __global__ void rb_match_keys(
    const double* __restrict__ X, long long m, int d, int R,
    const double* __restrict__ u, const double* __restrict__ w,
    const long long* __restrict__ lo, const long long* __restrict__ hi,
    const long long* __restrict__ shift, const unsigned char* __restrict__ single,
    const unsigned long long* __restrict__ skeys, const int* __restrict__ sids,
    const long long* __restrict__ off, int* __restrict__ labels)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const double* x = X + i * (long long)d;
    for (int r0 = 0; r0 < R; r0 += RB_KEYS) {     // RB_KEYS grids at a time, then the searches
        const int rn = R - r0 < RB_KEYS ? R - r0 : RB_KEYS;
        unsigned long long key[RB_KEYS];
        int in[RB_KEYS];
        rb_row_keys(x, d, r0, rn, single, u, w, lo, hi, shift, key, in);
        for (int c = 0; c < rn; c++) {
            const int r = r0 + c;
            if (!single[r]) continue;
            int lab = -1;
            if (in[c]) {
                long long a = off[r], z = off[r + 1];   // first index in [a, z) with skeys >= key
                while (a < z) {
                    long long mid = a + ((z - a) >> 1);
                    if (skeys[mid] < key[c]) a = mid + 1; else z = mid;
                }
                if (a < off[r + 1] && skeys[a] == key[c]) lab = sids[a];
            }
            labels[(long long)r * m + i] = lab;
        }
    }
}
