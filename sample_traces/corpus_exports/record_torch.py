"""A few PyTorch kernels whose demangled names differ between demanglers (anonymous namespaces, integer and bool
template arguments, functors in nested namespaces), run once each under ncu by record.sh."""
import torch

x = torch.randn(1 << 20, device="cuda")
h = x.half()
i = torch.randint(0, 1 << 20, (1 << 16,), device="cuda")
torch.cuda.synchronize()
y = x * 2.0                        # at::native vectorized_elementwise_kernel<4, AUnaryFunctor<..., MulFunctor>>
z = h + h                          # Half: CUDAFunctor_add<c10::Half>
s = x.sum()                        # reduce_kernel<512, 1, ReduceOp<...>>
m = torch.softmax(x.view(1024, 1024), dim=-1)    # (anonymous namespace)::cunn_SoftMaxForward<...>
g = x.index_select(0, i)           # index kernels with int64_t template arguments
c = torch.cat([x[:1000], x[:2000]])              # (anonymous namespace)::CatArrayBatchedCopy<...>
torch.cuda.synchronize()
print(float(y[0] + z[0].float() + s + m[0, 0] + g[0] + c[0]))
