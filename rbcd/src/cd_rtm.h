/* Hogwild adds in hardware transactions (Intel RTM), beside the portable fallback.
 *
 * Contract of rbcd_tx_add_i32 / _i64: a batch u[ind[k]] += dz (z == NULL) or
 * u[ind[k]] += delta * z[k], k0 <= k < k1, runs as one transaction: it commits as a whole or
 * not at all (a conflicting access by another thread aborts it and the CPU rolls its writes
 * back), so no add is lost or doubled. Returns 1 if the batch committed, 0 if not; the caller
 * then redoes the batch with per-entry atomic adds. Without RTM (another CPU or compiler, or
 * no OpenMP) both functions return 0 without touching u and rbcd_rtm_usable() is 0, so the
 * caller's atomic-add path is the whole behaviour.
 *
 * rbcd_rtm_usable(): CPUID.7.0:EBX[11] (RTM) set and CPUID.7.0:EDX[11] (RTM_ALWAYS_ABORT)
 * clear. */
#ifndef RBCD_CD_RTM_H
#define RBCD_CD_RTM_H

#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && RBCD_OPENMP
#include <cpuid.h>
#include <immintrin.h>

static int rbcd_rtm_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((b >> 11) & 1u)) return 0;   /* RTM */
    if ((d >> 11) & 1u) return 0;      /* RTM_ALWAYS_ABORT */
    return 1;
}

#define RBCD_TX_ADD(NAME, IDX)                                                        \
__attribute__((target("rtm"), noinline))                                              \
static int NAME(double *u, const IDX *ind, long long k0, long long k1, double dz,       \
                const double *z, double delta) {                                       \
    long long k;                                                                        \
    if (_xbegin() != _XBEGIN_STARTED) return 0;                                         \
    if (z == NULL) { for (k = k0; k < k1; k++) u[ind[k]] += dz; }                       \
    else { for (k = k0; k < k1; k++) u[ind[k]] += delta * z[k]; }                       \
    _xend();                                                                            \
    return 1;                                                                           \
}
RBCD_TX_ADD(rbcd_tx_add_i32, int32_t)
RBCD_TX_ADD(rbcd_tx_add_i64, int64_t)
#undef RBCD_TX_ADD

#else  /* portable fallback: no transactions; every batch goes to the atomic adds */

static int rbcd_rtm_usable(void) { return 0; }
static int rbcd_tx_add_i32(double *u, const int32_t *ind, long long k0, long long k1,
                           double dz, const double *z, double delta) {
    (void)u; (void)ind; (void)k0; (void)k1; (void)dz; (void)z; (void)delta;
    return 0;
}
static int rbcd_tx_add_i64(double *u, const int64_t *ind, long long k0, long long k1,
                           double dz, const double *z, double delta) {
    (void)u; (void)ind; (void)k0; (void)k1; (void)dz; (void)z; (void)delta;
    return 0;
}

#endif
#endif
