"""The fake model's logits of test/search/hash_logits.h, for the Python references: values of a hash of
(source ids, decoder prefix), exact in fp32, so that seqtrans and the references read the same numbers."""

MASK64 = (1 << 64) - 1


def hash_ids(values):
    """FNV-1a over the low 32 bits of each value, then the splitmix64 finalizer."""
    h = 0xCBF29CE484222325
    for x in values:
        h ^= x & 0xFFFFFFFF
        h = (h * 0x100000001B3) & MASK64
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & MASK64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & MASK64
    h ^= h >> 31
    return h


def hash_logits(source, prefix, vocab, spread, eos_id, eos_bias):
    """Logits in [-spread, spread) with 20 random bits each, plus eos_bias on the EOS id."""
    key = [len(source)] + list(source) + [len(prefix)] + list(prefix)
    row = []
    for token in range(vocab):
        unit = (hash_ids(key + [token]) >> 44) / float(1 << 19) - 1.0
        row.append(unit * spread + (eos_bias if token == eos_id else 0.0))
    return row
