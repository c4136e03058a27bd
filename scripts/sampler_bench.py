"""Times vLLM 0.15's PyTorch-native V1 sampler on one GPU.

The top-k/top-p path is vLLM's apply_top_k_top_p_pytorch (a full sort of
the [batch x vocab] float32 logits, softmax, cumsum, mask, scatter), then
its random_sample (softmax, exponential noise, divide, argmax), as in
vllm/v1/sample/ops/topk_topp_sampler.py (forward_native) before the Triton
kernel of PR #33538. Writes JSON rows {case, batch, vocab, ms} to argv[1].
"""
import json
import sys

import torch


def top_k_top_p(logits, k, p):
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort.masked_fill_(top_k_mask, -float("inf"))
    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


def random_sample(logits):
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    q = torch.empty_like(probs)
    q.exponential_()
    return probs.div_(q).argmax(dim=-1).view(-1)


def sampler(case, raw, temp, k, p):
    logits = raw.to(torch.float32)
    if case == "greedy":
        return logits.argmax(dim=-1)
    logits = logits.div_(temp.unsqueeze(1))
    if case == "topp":
        logits = top_k_top_p(logits, None, p)
    elif case == "topk_topp":
        logits = top_k_top_p(logits, k, p)
    return random_sample(logits)


def time_ms(fn, iters=20):
    """GPU time of fn: a sleeping kernel keeps the GPU busy while the
    host queues the iterations, so host launch time is left out."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(3e8))
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main():
    rows = []
    dev = "cuda"
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for vocab in (32000, 128256, 151936):
        for batch in (1, 8, 16, 32, 64, 128, 256, 512):
            raw = torch.randn(batch, vocab, device=dev, dtype=torch.bfloat16) * 3
            temp = torch.full((batch,), 0.6, device=dev)
            k = torch.full((batch,), 20, device=dev, dtype=torch.int32)
            p = torch.full((batch,), 0.9, device=dev)
            for case in ("greedy", "random", "topp", "topk_topp"):
                ms = time_ms(lambda: sampler(case, raw, temp, k, p))
                rows.append({"case": case, "batch": batch, "vocab": vocab, "ms": round(ms, 4)})
                print(case, batch, vocab, round(ms, 4), flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
