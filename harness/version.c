#include "run.h"
#ifndef S2HC_GIT
#define S2HC_GIT "unknown"
#endif
const char *s2hc_version(void) { return S2HC_GIT; }
