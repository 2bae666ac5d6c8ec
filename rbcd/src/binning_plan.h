/* Exact bin thresholds of random binning (rbcd/binning/_binning.pyx: thresholds,
 * range_bounds; the plan of rbcd/binning/random_binning.py).
 *
 * A bin of docs/design.md contract 3 is b(x) = floor((x - u) / w) in float64 with a true
 * division. x -> b(x) is monotone (IEEE subtraction, division by w > 0 and floor all are),
 * so for a bin k there is a smallest float64 t with b(t) >= k. rbcd_first_reaching finds
 * it among the float64 values of a bracket with the very formula of the bins, so keys
 * counted from such thresholds are the keys of the division, bit for bit.
 *
 * The search runs over the "ordered" integers of the values: the int64 bit pattern of a
 * float64, with the magnitude bits flipped for negative values, orders like the values
 * (-0.0 just below +0.0). It starts from a guess (u + k w, within a few ulps of t in
 * practice), gallops from there (steps of 1, 2, 4, ... values) until t is bracketed and
 * bisects the bracket: O(log of the guess's error) evaluations. The result does not
 * depend on the guess, only the search's speed does. */
#ifndef RBCD_BINNING_PLAN_H
#define RBCD_BINNING_PLAN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline int64_t rbcd_ordered_of(double x)
{
    int64_t b;
    memcpy(&b, &x, sizeof b);
    return b < 0 ? (b ^ INT64_MAX) : b;
}

static inline double rbcd_value_of(int64_t o)
{
    double x;
    if (o < 0) o ^= INT64_MAX;   /* the map is an involution */
    memcpy(&x, &o, sizeof x);
    return x;
}

/* b(x) >= k, with b(x) as in contract 3 (k a whole number as float64). */
static inline int rbcd_reaches(double x, double u, double w, double k)
{
    return floor((x - u) / w) >= k;
}

/* The smallest float64 t in (a, b] with b(t) >= k, for a < b where b(a) < k <= b(b)
 * (the caller guarantees the bracket). ``guess`` only speeds the search up (any value,
 * NaN or infinite included). */
static double rbcd_first_reaching(double a, double b, double u, double w, double k,
                                  double guess)
{
    int64_t lo = rbcd_ordered_of(a), hi = rbcd_ordered_of(b), g, c, mid;
    uint64_t step;
    /* invariant: not reached at lo, reached at hi */
    if (isfinite(guess)) {
        g = rbcd_ordered_of(guess);
        if (g <= lo) g = lo + 1;
        if (g > hi) g = hi;
        /* gallop away from the guess: steps 1, 2, 4, ... until the answer is bracketed */
        if (rbcd_reaches(rbcd_value_of(g), u, w, k)) {
            hi = g;
            for (step = 1; step < (uint64_t)hi - (uint64_t)lo; step <<= 1) {
                c = (int64_t)((uint64_t)hi - step);
                if (!rbcd_reaches(rbcd_value_of(c), u, w, k)) { lo = c; break; }
                hi = c;
            }
        } else {
            lo = g;
            for (step = 1; step < (uint64_t)hi - (uint64_t)lo; step <<= 1) {
                c = (int64_t)((uint64_t)lo + step);
                if (rbcd_reaches(rbcd_value_of(c), u, w, k)) { hi = c; break; }
                lo = c;
            }
        }
    }
    while ((uint64_t)hi - (uint64_t)lo > 1) {   /* the gap, below 2**64, halves */
        mid = lo + (int64_t)(((uint64_t)hi - (uint64_t)lo) >> 1);
        if (rbcd_reaches(rbcd_value_of(mid), u, w, k)) hi = mid; else lo = mid;
    }
    return rbcd_value_of(hi);
}

#endif
