"""Train a small ResNet image classifier on device ``tpu`` with a DataLoader.

The data set is synthetic, so nothing is downloaded: every class is a
smooth random colour pattern, and each image is its class's pattern shifted
by a few pixels, with noise on top. The network (a ResNet with basic blocks
and batch norm, written out below) learns it with SGD + momentum and a
cosine learning-rate schedule; train and eval accuracy are printed every
epoch. DataLoader workers are ordinary forked processes doing CPU work; only
the training process touches the device.

    python examples/image_classifier.py                        # 10 classes, 32x32, 4096 images, 3 epochs
    python examples/image_classifier.py --channels-last --amp  # NHWC and bf16 autocast
    python examples/image_classifier.py --train-size 512 --eval-size 256 --size 16 --width 8 --noise 1 --batch 32 --epochs 3  # tiny
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

import torchtpu  # noqa: F401  (registers device "tpu")


class Patterns(Dataset):
    """`n` images of `classes` classes, 3 x size x size, generated on the fly
    from the index (so workers need no shared state)."""

    def __init__(self, n, classes, size, noise, seed, split):
        g = torch.Generator().manual_seed(seed)
        coarse = torch.randn(classes, 3, 4, 4, generator=g)
        self.protos = F.interpolate(coarse, size=(size, size), mode="bilinear",
                                    align_corners=False)
        self.protos /= self.protos.flatten(1).std(1).view(-1, 1, 1, 1)
        self.n, self.classes, self.noise, self.size = n, classes, noise, size
        self.seed = seed * 1000 + (0 if split == "train" else 1)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        label = int(torch.randint(self.classes, (1,), generator=g))
        shift = self.size // 8
        dx, dy = torch.randint(-shift, shift + 1, (2,), generator=g).tolist()
        img = torch.roll(self.protos[label], shifts=(dy, dx), dims=(1, 2))
        img = img + self.noise * torch.randn(img.shape, generator=g)
        return img, label


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """A CIFAR-style ResNet: a 3x3 stem, three stages of basic blocks
    (width, 2x width, 4x width; the last two halve the resolution), global
    average pooling and a linear head."""

    def __init__(self, classes, width=16, blocks=(2, 2, 2)):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True))
        layers, cin = [], width
        for stage, n in enumerate(blocks):
            cout = width * 2 ** stage
            for b in range(n):
                layers.append(BasicBlock(cin, cout, 2 if (b == 0 and stage > 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def evaluate(model, loader, device, memory_format, amp):
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    seen = 0
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
        for x, y in loader:
            x = x.to(device, memory_format=memory_format)
            correct += (model(x).argmax(1) == y.to(device)).sum()
            seen += len(y)
    return correct.item() / seen  # one host read per pass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--size", type=int, default=32, help="image height and width")
    p.add_argument("--train-size", type=int, default=4096)
    p.add_argument("--eval-size", type=int, default=1024)
    p.add_argument("--noise", type=float, default=3.0, help="noise std (patterns have std 1)")
    p.add_argument("--width", type=int, default=16, help="channels of the first stage")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--amp", action="store_true", help="bf16 autocast")
    p.add_argument("--device", default="tpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format

    train = Patterns(args.train_size, args.classes, args.size, args.noise, args.seed, "train")
    test = Patterns(args.eval_size, args.classes, args.size, args.noise, args.seed, "eval")
    # drop_last keeps every training batch the same shape: one set of programs
    train_loader = DataLoader(train, batch_size=args.batch, shuffle=True, drop_last=True,
                              num_workers=args.workers, persistent_workers=args.workers > 0,
                              generator=torch.Generator().manual_seed(args.seed))
    test_loader = DataLoader(test, batch_size=args.batch, num_workers=args.workers,
                             persistent_workers=args.workers > 0)

    model = ResNet(args.classes, args.width).to(device, memory_format=memory_format)
    print(f"ResNet: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{len(train)} train / {len(test)} eval images of {args.size}x{args.size}, "
          f"{args.classes} classes (chance {1 / args.classes:.1%}), device {device}")
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                steps_per_epoch=len(train_loader))

    for epoch in range(args.epochs):
        model.train()
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), dtype=torch.long, device=device)
        for x, y in train_loader:
            x = x.to(device, memory_format=memory_format)
            y = y.to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp):
                logits = model(x)
                loss = F.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.detach()
            correct += (logits.argmax(1) == y).sum()
        steps = len(train_loader)
        train_acc = correct.item() / (steps * args.batch)
        train_loss = loss_sum.item() / steps
        eval_acc = evaluate(model, test_loader, device, memory_format, args.amp)
        print(f"epoch {epoch}  loss {train_loss:.4f}  train acc {train_acc:.3f}  "
              f"eval acc {eval_acc:.3f}  ({time.perf_counter() - t0:.1f} s)")
    return eval_acc


if __name__ == "__main__":
    main()
