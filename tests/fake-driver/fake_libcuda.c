/*
 * A stand-in for libcuda.so.1 that runs on the host, for tests on machines without a GPU.
 *
 * It exports the driver entry points pagesift-gpu loads, with the C signatures of cuda.h, and
 * behaves like a device whose memory is host memory: device pointers are host addresses,
 * copies are memcpy, streams run synchronously. Two kernels exist, recognised by entry name:
 * `axpb(x, y, a, b, n)` computes y[i] = fmaf(x[i], a, b), `spin(out, iters)` sets out[i] to
 * i after `iters` steps of v = fmaf(v, 0.999f, 0.001f), and `empty()` does nothing. A PTX
 * text containing "frobnicate" fails to load with a JIT log naming line 8, as the real JIT
 * does. It deliberately lacks cuDeviceGetUuid_v2 and cuEventElapsedTime_v2 (older drivers do).
 *
 * Build: cc -shared -fPIC -O1 -o libcuda.so.1 fake_libcuda.c -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

#define TOTAL_MEM ((size_t)2 << 30)
#define CTX ((void *)0x5eed)

static size_t used;
static int retained;
static int launches;
static int last_dyn_shared;

/* Test hooks (not driver API). */
int fake_launches(void) { return launches; }
int fake_last_dyn_shared(void) { return last_dyn_shared; }
int fake_retained(void) { return retained; }
size_t fake_used(void) { return used; }

CUresult cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }

CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
    case 218: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
    case 400: *s = "CUDA_ERROR_INVALID_HANDLE"; return 0;
    case 500: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
    default: *s = 0; return 1;
    }
}

CUresult cuGetErrorString(CUresult e, const char **s) {
    switch (e) {
    case 0: *s = "no error"; return 0;
    case 1: *s = "invalid argument"; return 0;
    case 2: *s = "out of memory"; return 0;
    case 101: *s = "invalid device ordinal"; return 0;
    case 201: *s = "invalid device context"; return 0;
    case 218: *s = "a PTX JIT compilation failed"; return 0;
    case 400: *s = "invalid resource handle"; return 0;
    case 500: *s = "named symbol not found"; return 0;
    default: *s = 0; return 1;
    }
}

CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) {
    if (ordinal != 0) return 101;
    *d = 0;
    return 0;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
    if (dev != 0) return 101;
    strncpy(name, "Fake CUDA Device", (size_t)len);
    name[len - 1] = 0;
    return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    if (dev != 0) return 101;
    switch (attr) {
    case 1: *v = 1024; return 0;          /* MAX_THREADS_PER_BLOCK */
    case 2: *v = 1024; return 0;          /* MAX_BLOCK_DIM_X */
    case 3: *v = 1024; return 0;          /* MAX_BLOCK_DIM_Y */
    case 4: *v = 64; return 0;            /* MAX_BLOCK_DIM_Z */
    case 5: *v = 2147483647; return 0;    /* MAX_GRID_DIM_X */
    case 6: *v = 65535; return 0;         /* MAX_GRID_DIM_Y */
    case 7: *v = 65535; return 0;         /* MAX_GRID_DIM_Z */
    case 8: *v = 49152; return 0;         /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 10: *v = 32; return 0;           /* WARP_SIZE */
    case 16: *v = 132; return 0;          /* MULTIPROCESSOR_COUNT */
    case 38: *v = 50331648; return 0;     /* L2_CACHE_SIZE */
    case 39: *v = 2048; return 0;         /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 75: *v = 9; return 0;            /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = 0; return 0;            /* COMPUTE_CAPABILITY_MINOR */
    case 97: *v = 232448; return 0;       /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    default: return 1;
    }
}
CUresult cuDeviceTotalMem_v2(size_t *b, int dev) {
    if (dev != 0) return 101;
    *b = TOTAL_MEM;
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    if (dev != 0) return 101;
    retained++;
    *ctx = CTX;
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    if (dev != 0 || retained == 0) return 201;
    retained--;
    return 0;
}
CUresult cuCtxSetCurrent(void *ctx) { return (ctx == CTX || ctx == 0) ? 0 : 201; }
CUresult cuCtxSynchronize(void) { return 0; }

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
    *free_b = TOTAL_MEM - used;
    *total = TOTAL_MEM;
    return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    if (bytes == 0) return 1;
    if (bytes > TOTAL_MEM - used) return 2;
    size_t *block = malloc(bytes + 16);
    if (!block) return 2;
    block[0] = bytes;
    used += bytes;
    *p = (CUdeviceptr)(uintptr_t)(block + 2);
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    if (p == 0) return 1;
    size_t *block = (size_t *)(uintptr_t)p - 2;
    used -= block[0];
    free(block);
    return 0;
}
CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    *p = malloc(bytes);
    return *p ? 0 : 2;
}
CUresult cuMemFreeHost(void *p) {
    free(p);
    return 0;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st) { (void)st; return cuMemcpyHtoD_v2(d, s, n); }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st) { (void)st; return cuMemcpyDtoH_v2(d, s, n); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { (void)st; return cuMemcpyDtoD_v2(d, s, n); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *st) { (void)st; memset((void *)(uintptr_t)d, v, n); return 0; }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void *st) {
    (void)st;
    uint32_t *w = (uint32_t *)(uintptr_t)d;
    for (size_t i = 0; i < n; i++) w[i] = v;
    return 0;
}

CUresult cuStreamCreate(void **s, unsigned flags) {
    if (flags != 1) return 1; /* pagesift-gpu creates non-blocking streams */
    *s = malloc(1);
    return 0;
}
CUresult cuStreamDestroy_v2(void *s) { free(s); return 0; }
CUresult cuStreamSynchronize(void *s) { (void)s; return 0; }

struct event { unsigned flags; int recorded; double t; };
CUresult cuEventCreate(void **e, unsigned flags) {
    struct event *ev = calloc(1, sizeof *ev);
    ev->flags = flags;
    *e = ev;
    return 0;
}
CUresult cuEventDestroy_v2(void *e) { free(e); return 0; }
CUresult cuEventRecord(void *e, void *s) {
    (void)s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    struct event *ev = e;
    ev->recorded = 1;
    ev->t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    return 0;
}
CUresult cuEventSynchronize(void *e) { return ((struct event *)e)->recorded ? 0 : 400; }
CUresult cuEventQuery(void *e) { (void)e; return 0; }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned flags) { (void)s; (void)e; return flags ? 1 : 0; }
CUresult cuStreamQuery(void *s) { (void)s; return 0; }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
    struct event *s = a, *e = b;
    if ((s->flags & 2) || (e->flags & 2) || !s->recorded || !e->recorded) return 400;
    *ms = (float)(e->t - s->t);
    return 0;
}

struct module { char *ptx; };
struct function { int kind; };
static struct function f_axpb = {1}, f_empty = {2}, f_spin = {3};

CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) {
    const char *ptx = image;
    char *error_log = 0;
    size_t error_size = 0;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == 5) error_log = vals[i];
        if (opts[i] == 6) error_size = (size_t)(uintptr_t)vals[i];
    }
    if (strstr(ptx, "frobnicate")) {
        const char *msg = "ptxas application ptx input, line 8; error   : Not a name of any known instruction: 'frobnicate'";
        if (error_log && error_size > 0) {
            strncpy(error_log, msg, error_size);
            error_log[error_size - 1] = 0;
        }
        return 218;
    }
    if (!strstr(ptx, ".version") || !strstr(ptx, ".target")) return 218;
    struct module *mod = malloc(sizeof *mod);
    mod->ptx = strdup(ptx);
    *m = mod;
    return 0;
}
CUresult cuModuleUnload(void *m) {
    struct module *mod = m;
    free(mod->ptx);
    free(mod);
    return 0;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    struct module *mod = m;
    char needle[256];
    snprintf(needle, sizeof needle, ".entry %s(", name);
    if (!strstr(mod->ptx, needle)) return 500;
    if (strcmp(name, "axpb") == 0) *f = &f_axpb;
    else if (strcmp(name, "empty") == 0) *f = &f_empty;
    else if (strcmp(name, "spin") == 0) *f = &f_spin;
    else return 500;
    return 0;
}
CUresult cuFuncGetAttribute(int *v, int attr, void *f) {
    (void)f;
    switch (attr) {
    case 0: *v = 1024; return 0;
    case 1: *v = 0; return 0;
    case 3: *v = 0; return 0;
    case 4: *v = 10; return 0;
    default: *v = 0; return 0;
    }
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int threads, size_t shared) {
    (void)f;
    (void)shared;
    if (threads <= 0) return 1;
    *n = 2048 / threads;
    return 0;
}
CUresult cuFuncSetAttribute(void *f, int attr, int value) {
    (void)f;
    if (attr == 8) last_dyn_shared = value;
    return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    (void)stream;
    (void)extra;
    if (bx * by * bz > 1024) return 1;
    if (shared > 49152 && (int)shared > last_dyn_shared) return 1;
    launches++;
    struct function *fn = f;
    if (fn->kind == 1) {
        float *x = *(float **)params[0];
        float *y = *(float **)params[1];
        float a, b;
        uint32_t n;
        memcpy(&a, params[2], 4);
        memcpy(&b, params[3], 4);
        memcpy(&n, params[4], 4);
        uint64_t threads = (uint64_t)gx * gy * gz * bx * by * bz;
        for (uint64_t i = 0; i < threads && i < n; i++) y[i] = fmaf(x[i], a, b);
    } else if (fn->kind == 3) {
        float *out = *(float **)params[0];
        uint32_t iters;
        memcpy(&iters, params[1], 4);
        uint64_t threads = (uint64_t)gx * gy * gz * bx * by * bz;
        uint32_t m, p;
        memcpy(&m, &(uint32_t){0x3F7FBE77u}, 4);
        memcpy(&p, &(uint32_t){0x3A83126Fu}, 4);
        float mul, add;
        memcpy(&mul, &m, 4);
        memcpy(&add, &p, 4);
        for (uint64_t i = 0; i < threads; i++) {
            float v = (float)i;
            for (uint32_t k = 0; k < iters; k++) v = fmaf(v, mul, add);
            out[i] = v;
        }
    }
    return 0;
}
