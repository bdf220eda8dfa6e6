"""mklmdb.py - what the LMDB tests feed mdb_load: dump(path, pairs) writes
the text form of a database (mdb_dump's "bytevalue" format), datum()
encodes a Caffe Datum (protocol buffer) as convert_imageset writes it.
Imported by the tests' embedded Python (sys.path has this directory).
"""

import os


def dump(path, pairs, mapsize=8388608):
    with open(path, "w") as f:
        f.write("VERSION=3\nformat=bytevalue\ntype=btree\nmapsize=%d\n"
                "HEADER=END\n" % mapsize)
        for k, v in pairs:
            f.write(" " + k.hex() + "\n " + v.hex() + "\n")
        f.write("DATA=END\n")


def dump_in(d, name, pairs):
    """dump() to d/NAME.txt, what the tests give mdb_load -f."""
    dump(os.path.join(d, name + ".txt"), pairs)


def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def datum(c, h, w, data, label, encoded):
    m = b"".join(varint(f << 3) + varint(v)
                 for f, v in ((1, c), (2, h), (3, w)))
    m += varint(4 << 3 | 2) + varint(len(data)) + data + varint(5 << 3) + \
        varint(label)
    return m + (varint(7 << 3) + varint(1) if encoded else b"")
