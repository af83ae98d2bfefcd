# ---- everything below is the same for every job: the constants above say
# which one (ddpbench --emit-pytorch writes them above this body).


def load_safetensors(path):
    """A .safetensors file: 8 bytes of header length, a JSON header naming each
    tensor's dtype, shape and byte range, then the raw little-endian data."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, t in header.items():
        if name != "__metadata__":
            begin, end = t["data_offsets"]
            a = np.frombuffer(data[begin:end], dtype="<f4").reshape(t["shape"])
            tensors[name] = torch.from_numpy(a.copy())
    return tensors


def save_safetensors(path, tensors):
    """The same format back (what ddpbench --save writes, minus its metadata)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().cpu().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def build_model():
    """nn.Sequential(Linear, act, Linear, act, ..., Linear), ddpbench's initial weights."""
    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}
    layers = []
    for i in range(len(LAYERS) - 1):
        if i > 0:
            layers.append(acts[ACT]())
        layers.append(nn.Linear(LAYERS[i], LAYERS[i + 1]))
    model = nn.Sequential(*layers)
    model.load_state_dict(load_safetensors(os.path.join(HERE, INIT_FILE)))
    return model


def build_optimizer(params):
    if OPTIM == "sgd":
        return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, dampening=DAMPENING,
                               weight_decay=WEIGHT_DECAY, nesterov=NESTEROV)
    cls = torch.optim.Adam if OPTIM == "adam" else torch.optim.AdamW
    return cls(params, lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WEIGHT_DECAY)


def autocast(device):
    """PRECISION bf16: torch.autocast to bfloat16 on this device; else nothing."""
    if PRECISION == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


CRITERION = {"mse": nn.MSELoss, "bce": nn.BCEWithLogitsLoss, "ce": nn.CrossEntropyLoss}[LOSS]()


class SavedOrderSampler(torch.utils.data.Sampler):
    """torch.utils.data.DistributedSampler's __iter__, with the permutation
    ddpbench drew for each epoch (its own RNG: torch.randperm would draw
    another) read from ORDER_FILE.  rank=None: the whole padded stream, in
    order (what single and DP read); else rank's shard, indices[rank::R]."""

    def __init__(self, order, num_replicas, rank=None, drop_last=False):
        self.order, self.R, self.rank, self.drop_last = order, num_replicas, rank, drop_last
        n = order.shape[1]
        if drop_last and n % self.R:
            self.num_samples = math.ceil((n - self.R) / self.R)
        else:
            self.num_samples = math.ceil(n / self.R)
        self.total_size = self.num_samples * self.R
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        indices = self.order[self.epoch].tolist()
        if not self.drop_last:  # pad by repeating the start
            pad = self.total_size - len(indices)
            indices += (indices * math.ceil(pad / len(indices)))[:pad] if pad > 0 else []
        else:  # or cut
            indices = indices[:self.total_size]
        if self.rank is None:
            return iter(indices)
        return iter(indices[self.rank:self.total_size:self.R])

    def __len__(self):
        return self.total_size if self.rank is None else self.num_samples


def checksum(model):
    """ddpbench's checksum of the parameters in order (0.weight, 0.bias, ...):
    the sum and the sum of magnitudes in double, and a 64-bit FNV-1a hash of
    the float32 bits, equal only for bit-identical parameters."""
    flat = torch.cat([p.detach().cpu().reshape(-1) for p in model.parameters()]).numpy()
    h = 0xCBF29CE484222325
    for byte in flat.astype("<f4").tobytes():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return flat.astype(np.float64).sum(), np.abs(flat.astype(np.float64)).sum(), h


def train(rank, world, device, args):
    """MODE's training loop on this process: the whole global batch (single, DP)
    or rank's shard of it (DDP)."""
    X = torch.from_numpy(np.load(os.path.join(HERE, X_FILE)))
    Y = torch.from_numpy(np.load(os.path.join(HERE, Y_FILE)))
    order = np.load(os.path.join(HERE, ORDER_FILE))
    model = build_model().to(device)
    if MODE == "dp":
        # nn.DataParallel splits the batch like torch.chunk over the GPUs; on a
        # machine without one it calls the module directly: DP's twin on a CPU
        # is the same mean loss over the same global batch, which is what the
        # equivalence contract says DP computes.
        model = nn.DataParallel(model, device_ids=GPUS if device.type == "cuda" else None)
    if MODE == "ddp":
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=BUCKET_MB, gradient_as_bucket_view=True)
    optimizer = build_optimizer(model.parameters())
    ddp_rank = rank if MODE == "ddp" else None
    sampler = SavedOrderSampler(order, REPLICAS, ddp_rank, DROP_LAST)
    rows = BATCH // world if MODE == "ddp" else BATCH  # each rank's DataLoader batch_size
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=rows,
                                         sampler=sampler, drop_last=DROP_LAST)
    step, loss = 0, float("nan")
    for epoch in range(order.shape[0]):
        sampler.set_epoch(epoch)
        batches = list(loader)
        for first in range(0, len(batches), ACCUM):
            group = batches[first:first + ACCUM]  # the step's micro-batches (the last may be fewer)
            step_rows = sum(len(x) for x, _ in group) * (world if MODE == "ddp" else 1)
            optimizer.zero_grad(set_to_none=False)
            # on the device: NCCL all-reduces CUDA tensors only (gloo takes either)
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            for i, (x, y) in enumerate(group):
                x, y = x.to(device), y.to(device)
                last = i == len(group) - 1
                sync = model.no_sync() if MODE == "ddp" and not last else contextlib.nullcontext()
                with sync:
                    # bf16: autocast's mixed precision over the forward pass and the
                    # loss (bf16 Linear and activations, an fp32 loss); backward
                    # outside it, as PyTorch recommends; the weights stay fp32
                    with autocast(device):
                        out = model(x)
                        # the mean over the step's rows; DDP averages the ranks'
                        # gradients, so each rank's share is weighted by world
                        part = CRITERION(out, y) * len(x)
                    (part / step_rows * (world if MODE == "ddp" else 1)).backward()
                loss_sum += part.detach().double()
            optimizer.step()
            if MODE == "ddp":
                dist.all_reduce(loss_sum)
            loss = loss_sum.item() / step_rows
            step += 1
            if step == STEPS:
                break
        if step == STEPS:
            break
    if rank == 0:
        net = model.module if MODE in ("dp", "ddp") else model
        s, a, bits = checksum(net)
        print(f"{MODE} twin on {device.type}: {step} steps")
        print(f"  final loss            {loss:.6f}")
        print(f"  checksum              sum {s:+.6e}  |sum| {a:.6e}  bits {bits:016x}")
        if args.save:
            save_safetensors(args.save, net.state_dict())


def ddp_rank(rank, world, port, args):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    device = torch.device(f"cuda:{GPUS[rank]}") if DEVICE == "cuda" else torch.device("cpu")
    if DEVICE == "cuda":
        torch.cuda.set_device(device)  # NCCL's own work (barriers) runs on the current device
    dist.init_process_group("nccl" if DEVICE == "cuda" else "gloo", rank=rank, world_size=world)
    try:
        train(rank, world, device, args)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", metavar="FILE", help="write the final weights (.safetensors)")
    args = parser.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # one BLAS thread per device, as ddpbench's workers
    if DEVICE == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = PRECISION == "tf32"
        torch.backends.cudnn.allow_tf32 = PRECISION == "tf32"
    if MODE == "ddp":
        with socket.socket() as s:  # a free port for the rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(ddp_rank, args=(WORLD, port, args), nprocs=WORLD)
    else:
        train(0, 1, torch.device(f"cuda:{GPUS[0]}" if DEVICE == "cuda" else "cpu"), args)


if __name__ == "__main__":
    main()
