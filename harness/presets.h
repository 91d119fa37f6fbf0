/* presets.h: named model/training scales (tiny, small, M, L) and the `s2hc params`
 * command (auxiliary parameter counts per method and n, checked against the table). */
#ifndef S2HC_PRESETS_H
#define S2HC_PRESETS_H
#include "config.h"

/* NULL-terminated: "tiny", "small", "M", "L". */
extern const char *const preset_names[];

/* Overwrite the model and training fields of c with preset `name` (every other field is
 * left as it is). Returns 0, or -1 for an unknown name (c untouched). */
int preset_apply(s2hc_config *c, const char *name);

/* `s2hc params ...` (argv[0] = "params"). Returns the exit code: 0, 1 when a closed
 * formula disagrees with the parameter table, 2 on a usage error. */
int params_main(int argc, char **argv);

#endif
