"""Reference numbers measured beside the native benchmark on the GPU machine: PyTorch's pageable
and pinned host-to-device copy bandwidth, cuBLAS SGEMM (TF32 off) and device copy bandwidth."""
import time
import torch


def timed(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def main():
    print("device:", torch.cuda.get_device_name(0))
    print("| size | pageable H2D | pinned H2D |")
    print("|---|---|---|")
    for mib in (16, 64, 256):
        n = mib << 20
        dst = torch.empty(n, dtype=torch.uint8, device="cuda")
        pageable = torch.randint(0, 255, (n,), dtype=torch.uint8)
        pinned = pageable.pin_memory()
        tp = timed(lambda: dst.copy_(pageable))
        tq = timed(lambda: dst.copy_(pinned, non_blocking=True))
        print(f"| {mib} MiB | {n / tp / 1e9:.1f} GB/s | {n / tq / 1e9:.1f} GB/s |")
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    t = timed(lambda: a @ b)
    print(f"cuBLAS SGEMM 4096^3 (TF32 off): {2 * 4096**3 / t / 1e12:.1f} TFLOP/s")
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    t = timed(lambda: y.copy_(x))
    print(f"device copy: {2 * x.numel() / t / 1e9:.0f} GB/s (read + write)")


if __name__ == "__main__":
    main()
