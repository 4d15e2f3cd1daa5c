/* A downstream C (or C++) program that includes the installed bnpcore header and
 * prints digamma, dlgamma, log Stirling numbers and the Antoniak mean, one value
 * per line as "name args value" for test_downstream.py to compare with SciPy. */
#include <stdio.h>

#include "bnpcore/bnpcore.h"

int main(void) {
    const double xs[5] = {1e-8, 0.5, 1.4616321449683622, 10.0, 1e8};
    bnp_stirling_t t;
    int i;
    for (i = 0; i < 5; ++i) printf("digamma %.17g %.17g\n", xs[i], bnp_digamma(xs[i]));
    for (i = 0; i < 5; ++i) printf("dlgamma %.17g 3.5 %.17g\n", xs[i], bnp_dlgamma(xs[i], 3.5));
    bnp_stirling_init(&t);
    if (bnp_stirling_grow(&t, 100) != 0) return 1;
    printf("log_stirling1 100 1 %.17g\n", bnp_stirling_log(&t, 100, 1));
    printf("log_stirling1 100 99 %.17g\n", bnp_stirling_log(&t, 100, 99));
    printf("log_stirling1 6 2 %.17g\n", bnp_stirling_log(&t, 6, 2));
    bnp_stirling_free(&t);
    printf("antoniak_mean 50 0.7 %.17g\n", bnp_antoniak_mean(50, 0.7));
    printf("abi %d\n", BNPCORE_ABI_VERSION);
    return 0;
}
