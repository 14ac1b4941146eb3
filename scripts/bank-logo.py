#!/usr/bin/env python3
"""Draws the BankApp samples' logo (a bank front on a blue rounded square) and
writes it as a 96x96 RGBA PNG with zlib: `scripts/bank-logo.py OUT.png`.
Shapes are sampled 4x4 per pixel, so edges are anti-aliased."""
import struct
import sys
import zlib

SIZE = 96
SUB = 4
BLUE = (0, 82, 147)
WHITE = (255, 255, 255)
GOLD = (242, 183, 5)


def in_round_rect(x, y, x0, y0, x1, y1, r):
    if not (x0 <= x <= x1 and y0 <= y <= y1):
        return False
    cx = min(max(x, x0 + r), x1 - r)
    cy = min(max(y, y0 + r), y1 - r)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r


def in_triangle(x, y, a, b, c):
    def side(p, q):
        return (q[0] - p[0]) * (y - p[1]) - (q[1] - p[1]) * (x - p[0])
    d1, d2, d3 = side(a, b), side(b, c), side(c, a)
    neg = d1 < 0 or d2 < 0 or d3 < 0
    pos = d1 > 0 or d2 > 0 or d3 > 0
    return not (neg and pos)


def colour_at(x, y):
    """The colour at point (x, y) in logo units (0..96), or None outside."""
    if not in_round_rect(x, y, 0, 0, 96, 96, 20):
        return None
    if (x - 48) ** 2 + (y - 28) ** 2 <= 6 ** 2:
        return GOLD
    if in_triangle(x, y, (48, 12), (86, 38), (10, 38)):
        return WHITE
    for left in (18, 43, 68):
        if left <= x <= left + 10 and 43 <= y <= 70:
            return WHITE
    if 12 <= x <= 84 and 74 <= y <= 82:
        return WHITE
    return BLUE


def pixels():
    rows = []
    for py in range(SIZE):
        row = bytearray([0])  # filter: none
        for px in range(SIZE):
            r = g = b = a = 0
            for sy in range(SUB):
                for sx in range(SUB):
                    c = colour_at(px + (sx + 0.5) / SUB, py + (sy + 0.5) / SUB)
                    if c is not None:
                        r, g, b, a = r + c[0], g + c[1], b + c[2], a + 1
            n = SUB * SUB
            if a:
                row += bytes((r // a, g // a, b // a, a * 255 // n))
            else:
                row += bytes(4)
        rows.append(bytes(row))
    return b"".join(rows)


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bank-logo.py OUT.png")
    png = b"\x89PNG\r\n\x1a\n"
    png += chunk(b"IHDR", struct.pack(">IIBBBBB", SIZE, SIZE, 8, 6, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(pixels(), 9))
    png += chunk(b"IEND", b"")
    with open(sys.argv[1], "wb") as out:
        out.write(png)


if __name__ == "__main__":
    main()
