// Sample program for Kernelscope's recorded Nsight Compute reports (see record.sh beside this file).
// Runs each chapter-5 kernel once on fresh pseudo-random data, checks its output, and exits non-zero
// on any CUDA error or wrong result. Build: nvcc -O3 -gencode=arch=compute_90,code=sm_90 -I../../../collectors/bench/kernels
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "chapter5.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(2); } } while (0)
#define LAUNCHED() do { CK(cudaGetLastError()); CK(cudaDeviceSynchronize()); } while (0)

static float bf2f(unsigned short v) { unsigned int u = ((unsigned int)v) << 16; float f; memcpy(&f, &u, 4); return f; }

int main() {
    int dev = 0, sms = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    int bad = 0;

    // 1. copy: 512 MiB in, 512 MiB out
    {
        long long bytes = 512ll << 20, n4 = bytes / 16;
        float4 *in, *out;
        CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, bytes));
        ks_fill_f32<<<sms * 8, 256>>>((float*)in, bytes / 4, 1u); LAUNCHED();
        CK(cudaMemset(out, 0xFF, bytes));
        ks_copy_u4<<<sms * 8, 256>>>(in, out, n4); LAUNCHED();
        std::vector<float> a(1 << 20), b(1 << 20);
        CK(cudaMemcpy(a.data(), (char*)in + bytes - (4 << 20), 4 << 20, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), (char*)out + bytes - (4 << 20), 4 << 20, cudaMemcpyDeviceToHost));
        if (memcmp(a.data(), b.data(), 4 << 20)) { fprintf(stderr, "copy: wrong output\n"); bad++; }
        CK(cudaFree(in)); CK(cudaFree(out));
    }
    // 2. transposes of an 8192 x 8192 FP32 matrix
    {
        const int n = 8192; size_t bytes = (size_t)n * n * 4;
        float *in, *out;
        CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, bytes));
        ks_fill_f32<<<sms * 8, 256>>>(in, (long long)n * n, 2u); LAUNCHED();
        std::vector<float> h((size_t)n * n), t((size_t)n * n);
        CK(cudaMemcpy(h.data(), in, bytes, cudaMemcpyDeviceToHost));
        struct { void (*k)(const float*, float*, int); int tile; const char* name; } ks[] = {
            {ks_transpose16, 16, "transpose16"}, {ks_transpose16_pad, 16, "transpose16_pad"},
            {ks_transpose32, 32, "transpose32"}, {ks_transpose32_pad, 32, "transpose32_pad"}};
        for (auto& k : ks) {
            CK(cudaMemset(out, 0xFF, bytes));
            k.k<<<dim3(n / k.tile, n / k.tile), dim3(k.tile, k.tile)>>>(in, out, n); LAUNCHED();
            CK(cudaMemcpy(t.data(), out, bytes, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < (size_t)n * n; i += 9973) {
                size_t r = i / n, c = i % n;
                if (t[c * n + r] != h[i]) { fprintf(stderr, "%s: wrong output at %zu\n", k.name, i); bad++; break; }
            }
        }
        CK(cudaFree(in)); CK(cudaFree(out));
    }
    // 3. shared-memory column reads with row stride 32 and 33 words (4-byte accesses)
    {
        const int blocks = sms * 8, threads = 256, iters = 1024;
        float* out; CK(cudaMalloc(&out, (size_t)blocks * threads * 4));
        int strides[] = {32, 33};
        for (int s : strides) {
            size_t smem = (size_t)(32 * s + 64) * 4;
            ks_colread4<<<blocks, threads, smem>>>(out, s, iters); LAUNCHED();
            float v; CK(cudaMemcpy(&v, out, 4, cudaMemcpyDeviceToHost));
            // lane 0 reads words c = 0..7 in turn: sum over iters of (c & 1023)
            double expect = 0; for (int it = 0; it < iters; ++it) expect += (it & 7);
            if (fabs(v - expect) > 1e-3 * expect) { fprintf(stderr, "colread stride %d: %f != %f\n", s, v, expect); bad++; }
        }
        CK(cudaFree(out));
    }
    // 4. tiled matmuls at the chapter's shape: M=1024, K=4096, N=12288, BF16
    {
        const int M = 1024, K = 4096, N = 12288;
        unsigned short *A, *W, *C;
        CK(cudaMalloc(&A, (size_t)M * K * 2)); CK(cudaMalloc(&W, (size_t)K * N * 2)); CK(cudaMalloc(&C, (size_t)M * N * 2));
        ks_fill_bf16<<<sms * 8, 256>>>(A, (long long)M * K, 3u);
        ks_fill_bf16<<<sms * 8, 256>>>(W, (long long)K * N, 4u); LAUNCHED();
        std::vector<unsigned short> hA((size_t)M * K), hW((size_t)K * N), hC((size_t)M * N);
        CK(cudaMemcpy(hA.data(), A, hA.size() * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hW.data(), W, hW.size() * 2, cudaMemcpyDeviceToHost));
        struct { void (*k)(const unsigned short*, const unsigned short*, unsigned short*, int, int, int); int bm, bn; const char* name; } ks[] = {
            {ks_matmul_64x64, 64, 64, "matmul_64x64"}, {ks_matmul_128x128, 128, 128, "matmul_128x128"}};
        for (auto& k : ks) {
            CK(cudaMemset(C, 0xFF, (size_t)M * N * 2));
            k.k<<<dim3(N / k.bn, M / k.bm), 256>>>(A, W, C, M, N, K); LAUNCHED();
            CK(cudaMemcpy(hC.data(), C, hC.size() * 2, cudaMemcpyDeviceToHost));
            double num = 0, den = 0;
            for (int s = 0; s < 64; ++s) {
                int r = (s * 131) % M, c = (s * 7919) % N;
                double ref = 0;
                for (int kk = 0; kk < K; ++kk) ref += (double)bf2f(hA[(size_t)r * K + kk]) * bf2f(hW[(size_t)kk * N + c]);
                double d = bf2f(hC[(size_t)r * N + c]) - ref;
                num += d * d; den += ref * ref;
            }
            double rel = sqrt(num / den);
            printf("%s: relative error %.2e over 64 sampled outputs\n", k.name, rel);
            if (!(rel < 1e-2)) { fprintf(stderr, "%s: wrong output\n", k.name); bad++; }
        }
        CK(cudaFree(A)); CK(cudaFree(W)); CK(cudaFree(C));
    }
    printf(bad ? "FAILED: %d checks\n" : "all checks passed\n", bad);
    return bad ? 1 : 0;
}
