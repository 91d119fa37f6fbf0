#include "run.h"
#ifndef S2HC_GIT
#define S2HC_GIT "unknown"
#endif
const char *s2hc_version(void) { return S2HC_GIT; }
#ifndef S2HC_OPT
#define S2HC_OPT "unknown"
#endif
const char *s2hc_build_opt(void) { return S2HC_OPT; }
