"""PyTorch + NCCL baseline for the Ulysses (sequence-parallel) head exchange.

Spawns one process per rank (rank r on cuda:r, NCCL process group on localhost)
and, for each dtype and per-rank byte size S, times on the current CUDA stream:

  send_recv_heads  x [B, T_r, H, D] -> [B, P*T_r, H/P, D]
                   (permute + dist.all_to_all_single + permute)
  gather_heads     the inverse, [B, P*T_r, H/P, D] -> [B, T_r, H, D]
  all_gather       dist.all_gather_into_tensor of x to [P, B, T_r, H, D],
                   then permute to [B, P*T_r, H, D] (skipped for B=1: already laid out)
  a2a_only         the bare dist.all_to_all_single on the permuted send buffer

T_r = S / (B*H*D*elem_size). Each op runs --warmup times, then --iters times back
to back with a CUDA event pair per iteration (median/p10/p90/mean) and one pair around
the whole run (back_to_back_us = total / iters). --rotate N cycles through N distinct
random inputs so the L2 cache does not flatter small sizes. Every reported statistic
is the max over ranks. Before timing each (dtype, size), gather_heads(send_recv_heads(x))
must reproduce x bitwise on every rank, else "MISMATCH" and exit 1.

Output: one JSON record per (op, dtype, bytes) on stdout (rank 0), progress on stderr,
optional --json file with all records as an array. Exit 3 if torch/CUDA/NCCL or enough
GPUs are missing. NVLink multicast (NVLS) is always left off.
"""
import os

# Never enable NVLink multicast: forced off before torch or NCCL is loaded.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

OPS = ("send_recv_heads", "gather_heads", "all_gather", "a2a_only")
ELEM_SIZE = {"bf16": 2, "fp8": 1}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def percentile(sorted_vals, q):
    """Linear-interpolated percentile of an already sorted list, q in [0, 100]."""
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def worker(rank, args, port):
    import torch
    import torch.distributed as dist

    P, B, H, D = args.world, args.batch, args.heads, args.head_dim
    Hp = H // P
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=P, device_id=dev)
    torch.manual_seed(1234 + rank)
    torch_dtypes = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}

    def all_max(vals):
        t = torch.tensor(vals, dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def comm_dtype(dtype):
        """dtype the collectives run on: dtype itself, or uint8 if NCCL rejects it."""
        if dtype is torch.bfloat16:
            return dtype, ""
        failed = 0.0
        probe = torch.ones(P * 4, dtype=torch.uint8, device=dev).view(dtype)
        try:
            dist.all_to_all_single(torch.empty_like(probe), probe)
            dist.all_gather_into_tensor(torch.empty(P * probe.numel(), dtype=dtype, device=dev), probe)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - any rejection means fall back
            failed = 1.0
            log(f"rank {rank}: NCCL rejected {dtype}: {type(e).__name__}: {e}")
        if all_max([failed])[0] > 0:
            return torch.uint8, f"{dtype} not supported by NCCL collectives; ran them on a torch.uint8 view of the same bytes"
        return dtype, ""

    records = []
    for dname in args.dtypes:
        dtype = torch_dtypes[dname]
        cdt, dnote = comm_dtype(dtype)
        for S in args.bytes:
            per_token = B * H * D * ELEM_SIZE[dname]
            base = {"impl": "nccl", "dtype": dname, "bytes_per_rank": S, "world": P, "batch": B,
                    "heads": H, "head_dim": D}
            if S % per_token or S < per_token:
                note = f"skipped: {S} bytes is not a positive multiple of B*H*D*elem = {per_token} bytes"
                for op in OPS:
                    records.append(dict(base, op=op, tokens_per_rank=None, median_us=None, p10_us=None,
                                        p90_us=None, mean_us=None, back_to_back_us=None,
                                        iters=0, note=note))
                    if rank == 0:
                        print(json.dumps(records[-1]), flush=True)
                continue
            Tr = S // per_token
            T = P * Tr

            def a2a(inp):
                out = torch.empty_like(inp)
                dist.all_to_all_single(out.view(cdt), inp.view(cdt))
                return out

            def to_send(x):  # [B, Tr, H, D] -> [P, B, Tr, H/P, D]
                return x.view(B, Tr, P, Hp, D).permute(2, 0, 1, 3, 4).contiguous()

            def send_recv_heads(x):  # [B, Tr, H, D] -> [B, T, H/P, D]
                out = a2a(to_send(x))
                return out.view(P, B, Tr, Hp, D).permute(1, 0, 2, 3, 4).contiguous().view(B, T, Hp, D)

            def gather_heads(y):  # [B, T, H/P, D] -> [B, Tr, H, D]
                inp = y.view(B, P, Tr, Hp, D).permute(1, 0, 2, 3, 4).contiguous()
                out = a2a(inp)
                return out.view(P, B, Tr, Hp, D).permute(1, 2, 0, 3, 4).contiguous().view(B, Tr, H, D)

            def all_gather(x):  # [B, Tr, H, D] -> [B, T, H, D]
                out = torch.empty((P, B, Tr, H, D), dtype=x.dtype, device=dev)
                dist.all_gather_into_tensor(out.view(cdt), x.view(cdt))
                if B == 1:
                    return out.view(1, T, H, D)  # [P, 1, Tr, H, D] is already [1, T, H, D]
                return out.permute(1, 0, 2, 3, 4).contiguous().view(B, T, H, D)

            def make_x():
                if dtype is torch.bfloat16:
                    return torch.randn((B, Tr, H, D), device=dev).to(dtype)
                return torch.randint(0, 256, (B, Tr, H, D), dtype=torch.uint8, device=dev).view(dtype)

            xs = [make_x() for _ in range(args.rotate)]

            # Correctness spot check: gather_heads(send_recv_heads(x)) == x bitwise, on every rank.
            z = gather_heads(send_recv_heads(xs[0]))
            ok = torch.equal(z.view(torch.uint8), xs[0].view(torch.uint8))
            if all_max([0.0 if ok else 1.0])[0] > 0:
                if rank == 0:
                    print(f"MISMATCH dtype={dname} bytes_per_rank={S}", flush=True)
                    log(f"MISMATCH: gather_heads(send_recv_heads(x)) != x for dtype={dname} bytes={S}")
                dist.destroy_process_group()
                sys.exit(1)
            del z

            ys = [send_recv_heads(x) for x in xs]
            sends = [to_send(x) for x in xs]
            inputs = {"send_recv_heads": (send_recv_heads, xs), "gather_heads": (gather_heads, ys),
                      "all_gather": (all_gather, xs), "a2a_only": (a2a, sends)}
            for op in OPS:
                fn, ins = inputs[op]
                n = len(ins)
                dist.barrier()
                torch.cuda.synchronize()
                for i in range(args.warmup):
                    fn(ins[i % n])
                torch.cuda.synchronize()
                dist.barrier()
                torch.cuda.synchronize()
                starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
                ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
                run_start = torch.cuda.Event(enable_timing=True)
                run_end = torch.cuda.Event(enable_timing=True)
                run_start.record()
                for i in range(args.iters):
                    starts[i].record()
                    fn(ins[i % n])
                    ends[i].record()
                run_end.record()
                torch.cuda.synchronize()
                times = sorted(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))  # ms -> us
                b2b = run_start.elapsed_time(run_end) * 1000.0 / args.iters
                med, p10, p90, mean, b2b = all_max([statistics.median(times), percentile(times, 10),
                                                    percentile(times, 90), statistics.fmean(times), b2b])
                notes = [dnote] if dnote else []
                if op == "all_gather" and B == 1:
                    notes.append("B=1: gathered [P,1,T_r,H,D] is already [1,T,H,D], permute skipped")
                rec = dict(base, op=op, tokens_per_rank=Tr, median_us=round(med, 3), p10_us=round(p10, 3),
                           p90_us=round(p90, 3), mean_us=round(mean, 3), back_to_back_us=round(b2b, 3),
                           iters=args.iters, note="; ".join(notes))
                records.append(rec)
                if rank == 0:
                    print(json.dumps(rec), flush=True)
                    log(f"{op:16s} {dname:4s} {S:>10d} B/rank T_r={Tr:<7d} median {med:10.2f} us  "
                        f"p10 {p10:10.2f}  p90 {p90:10.2f}  b2b {b2b:10.2f}")
            del xs, ys, sends, inputs
            torch.cuda.empty_cache()

    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
        log(f"wrote {len(records)} records to {args.json}")
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--bytes", default="131072,1048576,8388608,33554432,134217728",
                    help="comma-separated per-rank input sizes in bytes")
    ap.add_argument("--dtypes", default="bf16,fp8", help="comma-separated subset of bf16,fp8")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rotate", type=int, default=4, help="number of distinct inputs used round-robin")
    ap.add_argument("--json", default=None, help="also write all records as a JSON array here")
    args = ap.parse_args()
    try:
        args.bytes = [int(b) for b in args.bytes.split(",") if b.strip()]
    except ValueError:
        ap.error("--bytes must be comma-separated integers")
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if any(d not in ELEM_SIZE for d in args.dtypes):
        ap.error(f"--dtypes must be a subset of {','.join(ELEM_SIZE)}")
    if min(args.world, args.batch, args.heads, args.head_dim, args.iters, args.rotate) < 1 or args.warmup < 0:
        ap.error("--world/--batch/--heads/--head-dim/--iters/--rotate must be >= 1, --warmup >= 0")
    if args.heads % args.world:
        ap.error(f"--heads {args.heads} is not divisible by --world {args.world}")

    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except ImportError as e:
        log(f"nccl_bench: torch is not installed ({e})")
        sys.exit(3)
    if not torch.cuda.is_available():
        log("nccl_bench: CUDA is not available to torch")
        sys.exit(3)
    if not dist.is_available() or not dist.is_nccl_available():
        log("nccl_bench: torch.distributed with NCCL is not available")
        sys.exit(3)
    if torch.cuda.device_count() < args.world:
        log(f"nccl_bench: need {args.world} GPUs, found {torch.cuda.device_count()}")
        sys.exit(3)

    port = free_port()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    log(f"nccl_bench: world={args.world} B={args.batch} H={args.heads} D={args.head_dim} "
        f"torch={torch.__version__} nccl={torch.cuda.nccl.version()} port={port}")
    try:
        mp.spawn(worker, args=(args, port), nprocs=args.world, join=True)
    except mp.ProcessExitedException as e:
        log(f"nccl_bench: rank {e.error_index} exited with code {e.exit_code}")
        sys.exit(e.exit_code if e.exit_code and e.exit_code > 0 else 1)
    except mp.ProcessRaisedException as e:
        log(f"nccl_bench: a rank raised:\n{e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
