/* h5_attr.h: reading HDF5 attributes, shared by the run-file loader (probes/h5.c) and
 * the checkpoint reader (harness/checkpoint.c). Exposes hdf5.h: include it only where
 * HDF5 calls are made. */
#ifndef S2HC_H5_ATTR_H
#define S2HC_H5_ATTR_H
#include <hdf5.h>

/* A scalar string attribute (variable or fixed length) as a malloc'd string; NULL if it
 * is not a scalar string or cannot be read. */
char *h5_attr_read_str(hid_t a);

#endif
