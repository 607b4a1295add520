"""A stand-in for the PyTorch examples' word_language_model/main.py (written for these tests, not hwsweep-aware):
an RNN language model on a sequence-first batch (bptt x batch), trained by epochs, its weights updated by hand
(gradient clipping, then `p.data.add_(p.grad, alpha=-lr)`: no torch.optim), its own SGD learning rate of 20,
progress, validation and test lines in that example's `| ... |` style. Its corpus is made here: one epoch at the
default --batch_size 4 and --bptt 8 is 24 batches."""

import argparse
import math
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=20)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--bptt", type=int, default=8)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--save", default="model.pt")
args = parser.parse_args()
torch.manual_seed(args.seed)

VOCAB, TRAIN_TOKENS, HELD_TOKENS = 50, 772, 260
stream = torch.Generator().manual_seed(7)  # the corpus does not move with the seed
corpus = {name: torch.randint(0, VOCAB, (n,), generator=stream) for name, n in
          (("train", TRAIN_TOKENS), ("valid", HELD_TOKENS), ("test", HELD_TOKENS))}  # fmt: skip


def columns(tokens: torch.Tensor, width: int) -> torch.Tensor:
    """The token stream cut into `width` columns, sequence first: (length, width)."""
    rows = tokens.numel() // width
    return tokens[: rows * width].view(width, rows).t().contiguous()


class RNNModel(nn.Module):
    def __init__(self, vocab: int, hidden: int):
        super().__init__()
        self.encoder = nn.Embedding(vocab, hidden)
        self.rnn = nn.LSTM(hidden, hidden)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens, state):
        out, state = self.rnn(self.encoder(tokens), state)
        return self.decoder(out).view(-1, self.decoder.out_features), state

    def init_hidden(self, width: int):
        zeros = torch.zeros(1, width, self.rnn.hidden_size)
        return zeros, zeros.clone()


def chunk(source: torch.Tensor, i: int):
    n = min(args.bptt, len(source) - 1 - i)
    return source[i : i + n], source[i + 1 : i + 1 + n].reshape(-1)


def detached(state):
    return tuple(s.detach() for s in state)


train_data, valid_data, test_data = (columns(corpus[n], w) for n, w in
                                     (("train", args.batch_size), ("valid", 2), ("test", 2)))  # fmt: skip
model = RNNModel(VOCAB, 16)
criterion = nn.CrossEntropyLoss()


def evaluate(source: torch.Tensor) -> float:
    model.eval()
    total, state = 0.0, model.init_hidden(source.size(1))
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, args.bptt):
            data, targets = chunk(source, i)
            output, state = model(data, state)
            total += len(data) * criterion(output, targets).item()
    return total / (len(source) - 1)


lr, best = args.lr, None
batches = len(range(0, train_data.size(0) - 1, args.bptt))
for epoch in range(1, args.epochs + 1):
    started = time.time()
    model.train()
    state, running = model.init_hidden(args.batch_size), 0.0
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt), start=1):
        data, targets = chunk(train_data, i)
        model.zero_grad()
        state = detached(state)
        output, state = model(data, state)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        running += loss.item()
        if batch % args.log_interval == 0:
            mean = running / args.log_interval
            print(f"| epoch {epoch:3d} | {batch:5d}/{batches:5d} batches | lr {lr:02.2f} | ms/batch "
                  f"{1000 * (time.time() - started) / batch:5.2f} | loss {mean:5.2f} | ppl {math.exp(mean):8.2f}",
                  flush=True)  # fmt: skip
            running = 0.0
    valid = evaluate(valid_data)
    print("-" * 89)
    print(f"| end of epoch {epoch:3d} | time: {time.time() - started:5.2f}s | valid loss {valid:5.2f} | "
          f"valid ppl {math.exp(valid):8.2f}", flush=True)  # fmt: skip
    print("-" * 89)
    if best is None or valid < best:
        best = valid
        torch.save(model.state_dict(), args.save)
    else:
        lr /= 4.0
model.load_state_dict(torch.load(args.save))
test = evaluate(test_data)
print("=" * 89)
print(f"| End of training | test loss {test:5.2f} | test ppl {math.exp(test):8.2f}", flush=True)
print("=" * 89)
