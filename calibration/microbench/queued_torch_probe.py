import torch, json, statistics, time
x = torch.zeros(1, device="cuda"); y = torch.zeros(1 << 20, device="cuda")
res = {}
for name, fn in (("add_1_element", lambda: x.add_(1)), ("add_1M_elements", lambda: y.add_(1))):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    g = []
    for rep in range(7):
        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(40e6))  # about 20 ms of cycles at ~2 GHz
        e0.record()
        t0 = time.perf_counter()
        for _ in range(256): fn()
        sub = time.perf_counter() - t0
        e1.record(); torch.cuda.synchronize()
        g.append(e0.elapsed_time(e1) * 1e-3 / 256)
    res[name] = {"queued_gpu_per_kernel_s": statistics.median(g), "host_submit_per_kernel_s": sub / 256}
    print(name, "queued %.2f us a kernel, host submit %.2f us" % (statistics.median(g) * 1e6, sub / 256 * 1e6))
print(json.dumps(res))
