#!/usr/bin/python3
"""bench/count_ops.py: the operators one replica dispatches in a training
step (forward, loss, backward), the ops_per_step of app/predict/workload/.

Each model is built here from torch.nn in the structure of the
implementation the published cases ran (torchvision's ResNet-50 and
ResNet-101 bottlenecks, transformers' GPT-2 block with its tanh GELU (12,
24 and 36 blocks: small, medium, large),
BERT-base's encoder with its MLM head), at tiny widths: the count of
operators does not depend on the widths, and tiny tensors make it quick.
Counted with torch.profiler as bench/torch_dispatch.py counts: every aten::
event whose parent is not an aten:: event (what Python or autograd
dispatched).  Prints one line per model.

usage: bench/count_ops.py
"""
import math

import torch
from torch import nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

torch.set_num_threads(1)


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride, down):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.c2, self.b2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.c3, self.b3 = nn.Conv2d(mid, mid * 4, 1, bias=False), nn.BatchNorm2d(mid * 4)
        self.down = nn.Sequential(nn.Conv2d(cin, mid * 4, 1, stride, bias=False),
                                  nn.BatchNorm2d(mid * 4)) if down else None

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def resnet(blocks, w=2):
    layers = [nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = w
    for i, n in enumerate(blocks):
        for j in range(n):
            layers.append(Bottleneck(cin, w * 2 ** i, 2 if j == 0 and i > 0 else 1, j == 0))
            cin = w * 2 ** i * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers), torch.randn(2, 3, 32, 32), lambda out: F.cross_entropy(out, torch.tensor([0, 1]))


class GPT2Block(nn.Module):  # transformers' GPT2Block (v4.3): Conv1D as addmm, gelu_new
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.c_proj2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).permute(0, 2, 1, 3) for z in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.h)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        w = torch.where(mask, w, torch.tensor(-1e4))
        a = torch.matmul(self.drop(w.softmax(-1)), v).permute(0, 2, 1, 3).contiguous().view(b, t, d)
        x = x + self.drop(self.c_proj(a))
        m = self.c_fc(self.ln_2(x))
        m = 0.5 * m * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (m + 0.044715 * torch.pow(m, 3.0))))
        return x + self.drop(self.c_proj2(m))


class GPT2(nn.Module):
    def __init__(self, layers=12, d=8, h=2, vocab=16, ctx=4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(GPT2Block(d, h) for _ in range(layers))
        self.ln_f, self.drop = nn.LayerNorm(d), nn.Dropout(0.1)

    def forward(self, ids):
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(ids.shape[1])))
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the tied LM head
        return F.cross_entropy(logits[:, :-1].contiguous().view(-1, logits.shape[-1]),
                               ids[:, 1:].contiguous().view(-1))


class BertLayer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.i, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = (z(x).view(b, t, self.h, d // self.h).permute(0, 2, 1, 3) for z in (self.q, self.k, self.v))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.h) + mask
        a = torch.matmul(self.drop(w.softmax(-1)), v).permute(0, 2, 1, 3).contiguous().view(b, t, d)
        x = self.ln1(x + self.drop(self.o(a)))
        return self.ln2(x + self.drop(self.out(F.gelu(self.i(x)))))


class Bert(nn.Module):
    def __init__(self, layers=12, d=8, h=2, vocab=16, ctx=4):
        super().__init__()
        self.we, self.pe, self.te = nn.Embedding(vocab, d), nn.Embedding(ctx, d), nn.Embedding(2, d)
        self.ln, self.drop = nn.LayerNorm(d), nn.Dropout(0.1)
        self.layers = nn.ModuleList(BertLayer(d, h) for _ in range(layers))
        self.head, self.head_ln = nn.Linear(d, d), nn.LayerNorm(d)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids):
        t = ids.shape[1]
        x = self.we(ids) + self.pe(torch.arange(t)) + self.te(torch.zeros_like(ids))
        x = self.drop(self.ln(x))
        mask = (1.0 - torch.ones(ids.shape[0], 1, 1, t)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        logits = F.linear(self.head_ln(F.gelu(self.head(x))), self.we.weight, self.bias)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), ids.view(-1))


def count(model, inp, loss_of):
    def step():
        out = model(inp)
        loss = loss_of(out) if loss_of else out
        loss.backward()
        model.zero_grad(set_to_none=True)
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    ev = [e for e in prof.events() if e.name.startswith("aten::")]
    ids = {e.id for e in ev}
    return len([e for e in ev if not (e.cpu_parent and e.cpu_parent.id in ids
                                      and e.cpu_parent.name.startswith("aten::"))])


def main():
    ids = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    for name, (m, x, lo) in (("resnet50", resnet([3, 4, 6, 3])), ("resnet101", resnet([3, 4, 23, 3]))):
        print(f"{name}: {count(m, x, lo)} operators a step (torch {torch.__version__})")
    for name, layers in (("gpt2-small", 12), ("gpt2-medium", 24), ("gpt2-large", 36)):
        print(f"{name}: {count(GPT2(layers), ids, None)} operators a step (torch {torch.__version__})")
    print(f"bert-base: {count(Bert(), ids, None)} operators a step (torch {torch.__version__})")


if __name__ == "__main__":
    main()
