/*
 * error.c - status names and the thread-local "last error" detail.
 *
 * Every failing internal call records a message with nnpops__fail(); nnpops_last_error() returns it
 * to the caller of the public API in the same thread.  The buffer is owned by the library and stays
 * valid until the next failing call in that thread.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define NNPOPS__ERROR_CAP 2048

static _Thread_local char last_error[NNPOPS__ERROR_CAP];

const char *nnpops_status_name(nnpops_status status) {
    switch (status) {
    case NNPOPS_OK: return "NNPOPS_OK";
    case NNPOPS_ERROR_INVALID_ARGUMENT: return "NNPOPS_ERROR_INVALID_ARGUMENT";
    case NNPOPS_ERROR_OUT_OF_MEMORY: return "NNPOPS_ERROR_OUT_OF_MEMORY";
    case NNPOPS_ERROR_IO: return "NNPOPS_ERROR_IO";
    case NNPOPS_ERROR_MODEL_NOT_FOUND: return "NNPOPS_ERROR_MODEL_NOT_FOUND";
    case NNPOPS_ERROR_MODEL_FORMAT: return "NNPOPS_ERROR_MODEL_FORMAT";
    case NNPOPS_ERROR_CHECKSUM: return "NNPOPS_ERROR_CHECKSUM";
    case NNPOPS_ERROR_UNKNOWN_ELEMENT: return "NNPOPS_ERROR_UNKNOWN_ELEMENT";
    case NNPOPS_ERROR_BAD_POSITION: return "NNPOPS_ERROR_BAD_POSITION";
    case NNPOPS_ERROR_ATOMS_TOO_CLOSE: return "NNPOPS_ERROR_ATOMS_TOO_CLOSE";
    case NNPOPS_ERROR_BAD_CELL: return "NNPOPS_ERROR_BAD_CELL";
    case NNPOPS_ERROR_TOO_MANY_IMAGES: return "NNPOPS_ERROR_TOO_MANY_IMAGES";
    case NNPOPS_ERROR_NEIGHBOR_OVERFLOW: return "NNPOPS_ERROR_NEIGHBOR_OVERFLOW";
    case NNPOPS_ERROR_DEVICE_NOT_BUILT: return "NNPOPS_ERROR_DEVICE_NOT_BUILT";
    case NNPOPS_ERROR_NO_DEVICE: return "NNPOPS_ERROR_NO_DEVICE";
    case NNPOPS_ERROR_CUDA: return "NNPOPS_ERROR_CUDA";
    case NNPOPS_ERROR_UNSUPPORTED: return "NNPOPS_ERROR_UNSUPPORTED";
    case NNPOPS_ERROR_CAPTURE: return "NNPOPS_ERROR_CAPTURE";
    case NNPOPS_ERROR_INTERNAL: return "NNPOPS_ERROR_INTERNAL";
    }
    return "NNPOPS_ERROR_UNKNOWN_STATUS";
}

const char *nnpops_last_error(void) { return last_error; }

void nnpops__clear_error(void) { last_error[0] = '\0'; }

nnpops_status nnpops__fail(nnpops_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

nnpops_status nnpops__fail_prefix(nnpops_status status, const char *fmt, ...) {
    char prefix[512];
    char old[NNPOPS__ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* the message is cut at the buffer size on purpose */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
    snprintf(last_error, sizeof last_error, "%s: %s", prefix, old);
#pragma GCC diagnostic pop
    return status;
}
