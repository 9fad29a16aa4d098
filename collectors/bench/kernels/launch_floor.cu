// The launch floor from C++: an empty kernel launched through the CUDA runtime (kernelscope bench,
// launch.overhead). The suite compiles it with nvcc at run time:
//     nvcc -O2 -std=c++17 -arch=native -o ks_launch_floor launch_floor.cu
//     ks_launch_floor DEVICE LAUNCHES ROUNDS
// It prints one JSON object on stdout, times in seconds per launch, one value per round (or per sample):
//     {"submit": [...], "back_to_back": [...], "launch_sync": [...], "launches": N, "runtime": V, "driver": V}
// submit: host clock around LAUNCHES back-to-back launches, per launch; back_to_back: until the device has run them
// all (cudaDeviceSynchronize), per launch; launch_sync: one launch followed by cudaStreamSynchronize, each.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void ks_empty_cxx(int) {}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#define KS_CHECK(x)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_));         \
            return 2;                                                                    \
        }                                                                                \
    } while (0)

static void print_list(const char* name, const std::vector<double>& v, bool last) {
    std::printf("\"%s\": [", name);
    for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.9e", i ? ", " : "", v[i]);
    std::printf("]%s", last ? "" : ", ");
}

int main(int argc, char** argv) {
    const int dev = argc > 1 ? std::atoi(argv[1]) : 0;
    const int n = argc > 2 ? std::atoi(argv[2]) : 2000;
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
    if (n < 1 || rounds < 1) {
        std::fprintf(stderr, "usage: ks_launch_floor DEVICE LAUNCHES ROUNDS\n");
        return 1;
    }
    KS_CHECK(cudaSetDevice(dev));
    KS_CHECK(cudaFree(0));
    for (int i = 0; i < 100; ++i) ks_empty_cxx<<<1, 32>>>(0);           // warm-up: module load, first launches
    KS_CHECK(cudaGetLastError());
    KS_CHECK(cudaDeviceSynchronize());
    std::vector<double> submit, done, sync;
    for (int r = 0; r < rounds; ++r) {
        KS_CHECK(cudaDeviceSynchronize());
        const double t0 = now_s();
        for (int i = 0; i < n; ++i) ks_empty_cxx<<<1, 32>>>(0);
        const double t1 = now_s();
        KS_CHECK(cudaDeviceSynchronize());
        const double t2 = now_s();
        submit.push_back((t1 - t0) / n);
        done.push_back((t2 - t0) / n);
    }
    KS_CHECK(cudaGetLastError());
    const int m = n / 4 > 20 ? n / 4 : 20;
    for (int i = 0; i < m; ++i) {
        const double t0 = now_s();
        ks_empty_cxx<<<1, 32>>>(0);
        KS_CHECK(cudaStreamSynchronize(0));
        sync.push_back(now_s() - t0);
    }
    KS_CHECK(cudaGetLastError());
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    std::printf("{");
    print_list("submit", submit, false);
    print_list("back_to_back", done, false);
    print_list("launch_sync", sync, false);
    std::printf("\"launches\": %d, \"runtime\": %d, \"driver\": %d}\n", n, runtime, driver);
    return 0;
}
