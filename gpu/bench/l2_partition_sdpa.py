# PyTorch SDPA's cuDNN forward at d = 128, N = 32K, B = 1, H = 8, fp16, non-causal: launched twice
# (the first builds cuDNN's plan) for gpu/bench/l2_partition.sh to profile the second under ncu.
# Run: python3 gpu/bench/l2_partition_sdpa.py
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, N, d = 1, 8, 32768, 128
gen = torch.Generator(device="cuda").manual_seed(1)
q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16, generator=gen) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(2):
        o = F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
print("sdpa cudnn", B, H, N, d, float(o.float().abs().mean()))
