"""The protein vocabulary of the trainer (data/vocab.h): token ids as stored in
the data files and read by the model.

    0 <pad>  1 <end> (separator / end of protein)  2 <mask>  3 <unk>
    4..23  the 20 canonical amino acids A C D E F G H I K L M N P Q R S T V W Y
    24 B  25 Z  26 X  27 U  28 O
"""

PAD, END, MASK, UNK = 0, 1, 2, 3
FIRST_RESIDUE = 4
RESIDUES = "ACDEFGHIKLMNPQRSTVWYBZXUO"
SIZE = FIRST_RESIDUE + len(RESIDUES)  # 29
SPECIALS = ("<pad>", "<end>", "<mask>", "<unk>")
# The text every data file stores (attribute `vocab`): token i is entry i.
DESCRIPTION = ",".join(SPECIALS + tuple(RESIDUES))

_TOKEN_OF = {c: FIRST_RESIDUE + i for i, c in enumerate(RESIDUES)}
_TOKEN_OF.update({c.lower(): t for c, t in list(_TOKEN_OF.items())})


def token_of(letter, map_unknown_to_x=False):
    """Token of one residue letter (either case), or None when it is not one
    (with map_unknown_to_x, any other ASCII letter gives X)."""
    t = _TOKEN_OF.get(letter)
    if t is None and map_unknown_to_x and letter.isascii() and letter.isalpha():
        return _TOKEN_OF["X"]
    return t


def encode(sequence, map_unknown_to_x=False):
    """Residue tokens of a sequence string; ValueError naming the first bad letter."""
    out = []
    for i, c in enumerate(sequence):
        t = token_of(c, map_unknown_to_x)
        if t is None:
            raise ValueError(f"column {i + 1}: {c!r} is not a residue letter ({RESIDUES}, either case)")
        out.append(t)
    return out


def decode(tokens):
    """Letters of residue tokens ('?' for special tokens)."""
    return "".join(RESIDUES[t - FIRST_RESIDUE] if FIRST_RESIDUE <= t < SIZE else "?" for t in tokens)
