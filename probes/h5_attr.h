/* h5_attr.h: reading and writing HDF5 attributes and checking number types, shared by
 * the run file's code (probes/h5.c) and the checkpoint's (harness/checkpoint.c). Exposes
 * hdf5.h: include it only where HDF5 calls are made. */
#ifndef S2HC_H5_ATTR_H
#define S2HC_H5_ATTR_H
#include <hdf5.h>

/* A scalar string attribute (variable or fixed length) as a malloc'd string; NULL if it
 * is not a scalar string or cannot be read. */
char *h5_attr_read_str(hid_t a);

/* Write a scalar variable-length UTF-8 string attribute (NULL writes ""), replacing one
 * of that name. 0, or -1 on an HDF5 error. */
int h5_attr_write_str(hid_t obj, const char *name, const char *value);

/* 1 when `type` is a float of 4 or 8 bytes or an integer of 1, 2, 4 or 8: the numbers
 * the run and checkpoint files hold (anything else is refused before libhdf5 converts it) */
int h5_plain_number(hid_t type);

#endif
