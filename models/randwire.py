"""RandWire network generator (Xie et al., "Exploring Randomly Wired Neural Networks for Image
Recognition", ICCV 2019), small regime, as used in the IOS / LIOS evaluations.

Each of the three random stages (conv3, conv4, conv5) wires N nodes by a Watts-Strogatz graph
WS(k, p), made a DAG by orienting every edge from the lower to the higher node index. A node sums
its inputs (sum aggregation), then applies ReLU -> 3x3 separable conv (depthwise + pointwise) -> BN
and sends the result to every successor. Nodes with no predecessor read the stage input (with
stride 2); the stage output is the mean of the nodes with no successor.

Small regime (Table 1 of the paper): conv1 3x3/2 (C/2, BN), conv2 ReLU-3x3 conv/2 (C, BN),
conv3 random (N, C), conv4 random (N, 2C), conv5 random (N, 4C), classifier ReLU-1x1 conv 1280-BN,
global average pool, fully connected 1000. With N=32, C=78, WS(4, 0.75) as in IOS.
"""
import random

import torch
from torch import nn


def watts_strogatz(n, k, p, rng):
    """Undirected WS(k, p) graph on n nodes as a set of (lo, hi) pairs, generated like networkx's
    `watts_strogatz_graph`: a ring lattice where each node joins its k/2 clockwise neighbours, then
    each lattice edge (u, u+j) is rewired to (u, w) with probability p, w uniform among the nodes
    that are neither u nor already adjacent to u."""
    adj = {u: set() for u in range(n)}
    for u in range(n):
        for j in range(1, k // 2 + 1):
            v = (u + j) % n
            adj[u].add(v)
            adj[v].add(u)
    for j in range(1, k // 2 + 1):
        for u in range(n):
            v = (u + j) % n
            if rng.random() < p:
                choices = [w for w in range(n) if w != u and w not in adj[u]]
                if not choices or v not in adj[u]:
                    continue
                w = rng.choice(choices)
                adj[u].discard(v)
                adj[v].discard(u)
                adj[u].add(w)
                adj[w].add(u)
    return sorted({(min(u, v), max(u, v)) for u in adj for v in adj[u]})


class SepConv(nn.Module):
    """ReLU -> 3x3 depthwise conv -> 1x1 pointwise conv -> BN."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.relu = nn.ReLU()
        self.dw = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.pw(self.dw(self.relu(x))))


class RandomStage(nn.Module):
    """One randomly wired stage: a DAG of SepConv nodes from a WS graph."""

    def __init__(self, cin, cout, n, k, p, rng):
        super().__init__()
        edges = watts_strogatz(n, k, p, rng)
        self.preds = [[u for (u, v) in edges if v == i] for i in range(n)]
        has_succ = {u for (u, _) in edges}
        self.outputs = [i for i in range(n) if i not in has_succ]
        self.edges = edges
        self.nodes = nn.ModuleList(
            SepConv(cin, cout, 2) if not self.preds[i] else SepConv(cout, cout, 1) for i in range(n)
        )

    def forward(self, x):
        results = []
        for i, node in enumerate(self.nodes):
            preds = self.preds[i]
            if not preds:
                inp = x
            else:
                inp = results[preds[0]]
                for u in preds[1:]:
                    inp = inp + results[u]
            results.append(node(inp))
        out = results[self.outputs[0]]
        for i in self.outputs[1:]:
            out = out + results[i]
        return out / float(len(self.outputs))


class RandWire(nn.Module):
    """RandWire small regime: two conv stem layers, three random stages, classifier."""

    def __init__(self, seed, n=32, c=78, k=4, p=0.75, num_classes=1000):
        super().__init__()
        rng = random.Random(seed)
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, c // 2, 3, 2, 1, bias=False), nn.BatchNorm2d(c // 2)
        )
        self.conv2 = nn.Sequential(
            nn.ReLU(), nn.Conv2d(c // 2, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c)
        )
        self.conv3 = RandomStage(c, c, n, k, p, rng)
        self.conv4 = RandomStage(c, 2 * c, n, k, p, rng)
        self.conv5 = RandomStage(2 * c, 4 * c, n, k, p, rng)
        self.classifier = nn.Sequential(
            nn.ReLU(), nn.Conv2d(4 * c, 1280, 1, bias=False), nn.BatchNorm2d(1280)
        )
        self.fc = nn.Linear(1280, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.conv5(self.conv4(self.conv3(self.conv2(self.conv1(x)))))
        x = self.classifier(x)
        x = torch.flatten(torch.mean(x, dim=(2, 3)), 1)
        return self.fc(x)

    def stage_edges(self):
        """Edge lists of the three random stages (for the manifest)."""
        return [s.edges for s in (self.conv3, self.conv4, self.conv5)]
