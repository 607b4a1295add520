"""Train a small MLP on a synthetic classification task with PyTorch Lightning.

An ordinary Lightning script: the Trainer handles devices, DDP and precision.
With --devices > 1 Lightning starts the extra processes itself.

    python train.py --accelerator cpu --devices 2 --max_steps 100 --default_root_dir runs/a
"""

import argparse
import math
import os
import warnings

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

IN_DIM = 16
N_CLASSES = 4
VAL_SIZE = 1024
DATA_SEED = 1234  # the task is fixed; --seed only changes init and data order

# The data lives in memory, so worker processes would only add start-up time.
warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*no `val_dataloader`.*")  # validated after fit, on purpose
# 1024 val samples split evenly over ranks, so no sample is counted twice.
warnings.filterwarnings("ignore", ".*it is recommended to use `Trainer\(devices=1, num_nodes=1\)`.*")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--accelerator", choices=["cpu", "cuda", "gpu"], default="cpu")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--num_nodes", type=int, default=1)
    p.add_argument("--accumulate_grad_batches", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=32, help="per-device micro-batch")
    p.add_argument("--precision", choices=["32-true", "bf16-mixed", "16-mixed"], default="32-true")
    p.add_argument("--max_steps", type=int, default=100, help="optimizer steps")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--default_root_dir", type=str, default="out")
    p.add_argument("--ckpt_path", type=str, default=None, help="resume from this checkpoint if it exists")
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--data_size", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=64)
    return p.parse_args()


def make_data(n_train):
    """Inputs are Gaussian; labels come from a fixed random teacher MLP."""
    g = torch.Generator().manual_seed(DATA_SEED)
    w1 = torch.randn(IN_DIM, 32, generator=g) / math.sqrt(IN_DIM)
    w2 = torch.randn(32, N_CLASSES, generator=g) / math.sqrt(32)

    def sample(n):
        x = torch.randn(n, IN_DIM, generator=g)
        y = (torch.tanh(x @ w1) @ w2).argmax(dim=1)
        return TensorDataset(x, y)

    return sample(n_train), sample(VAL_SIZE)


class Classifier(L.LightningModule):
    def __init__(self, hidden, lr):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(IN_DIM, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, N_CLASSES),
        )
        # Micro-batch losses since the last optimizer step (for the step log line).
        self._losses = []
        self._last_step = 0

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x).float(), y)
        self._losses.append(loss.detach())
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # Called per micro-batch; global_step only moves after an optimizer step.
        step = self.trainer.global_step
        if step == self._last_step:
            return
        self._last_step = step
        loss = torch.stack(self._losses).mean()
        self._losses = []
        if step % 10 == 0:
            # Every rank reaches this point, so the collective is safe.
            loss = self.trainer.strategy.reduce(loss, reduce_op="mean")
            if self.trainer.is_global_zero:
                print(f"step {step}: train_loss {loss.item():.4f}", flush=True)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits.float(), y)
        acc = (logits.argmax(dim=1) == y).float().mean()
        self.log_dict({"val_loss": loss, "val_acc": acc}, batch_size=len(y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=0.01)


def main():
    args = parse_args()
    L.seed_everything(args.seed, workers=True)

    train_set, val_set = make_data(args.data_size)
    # Under DDP Lightning swaps in a DistributedSampler itself.
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256)

    model = Classifier(args.hidden, args.lr)
    ckpt_dir = os.path.join(args.default_root_dir, "checkpoints")
    distributed = args.devices * args.num_nodes > 1
    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=args.devices,
        num_nodes=args.num_nodes,
        strategy="ddp" if distributed else "auto",  # gloo on CPU, nccl on GPU
        precision=args.precision,
        max_steps=args.max_steps,
        accumulate_grad_batches=args.accumulate_grad_batches,
        deterministic=args.deterministic,
        default_root_dir=args.default_root_dir,
        logger=False,
        callbacks=[ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=0,
                                   every_n_train_steps=50)],
        enable_progress_bar=False,
        enable_model_summary=False,
    )

    # fit() gets no val loader: validation runs once, explicitly, after training.
    ckpt_path = args.ckpt_path if args.ckpt_path and os.path.exists(args.ckpt_path) else None
    trainer.fit(model, train_loader, ckpt_path=ckpt_path)
    # The callback saves only every 50 steps; keep the final state too. All ranks
    # call this, Lightning writes it from rank 0.
    trainer.save_checkpoint(os.path.join(ckpt_dir, "last.ckpt"))

    metrics = trainer.validate(model, val_loader, verbose=False)[0]
    if trainer.is_global_zero:
        print(f"final val_loss {metrics['val_loss']:.4f} val_acc {metrics['val_acc']:.4f}", flush=True)


if __name__ == "__main__":
    main()
