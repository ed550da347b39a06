"""The X's of a level that admit no head within a head's share of the budget (multi_head._admitted finds
none), one bit each in _x_index order (the first entry's value lowest, bit 0 of byte 0 first), per
(level, causal): _draft skips them without costing their table. Level 2 only: of the X's it draws, 60 %
admit no head without the mask and 8 % with it, and refusing one cost most of a full table; at level 3
hardly any X is refused.

Made by multi_head.no_head_table (tests/test_kinds_multi_head_fast_paths.py remakes every bit);
after a change to the level's sizes, values, checks or budget, print it again:
    python -c "from exercises.kinds.multi_head import print_no_head_tables; print_no_head_tables()"
"""

from __future__ import annotations

TABLES: dict[tuple[int, bool], str] = {
    (2, False): (
        "2994fc50aaf8fffb2a3bffff2a3a2e7bb8f8f8502184fc71fffbfc59ae3b2d95fc502222f9d8a5dc2585ffff258d2ddd"
        "f0d82222f850ecd1adcd2222ad9dfc59aaf8f9d824c1fbfc2aeaffff2aee2bfe2481f0d8e8f8fbfeabeef9dcfffeffff"
        "fffba5dcfbfc2dfc25fdffff25ff27fff1fce1dcfefbfffffffffdddffffffff2a3b25852aea25fdf000fffff000f000"
        "2bfa25c52a3a2df529ed2ddd2cbb2e7bffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
        "2a3a258d2aee25fff000fffff000f0002aea2d952e7a2ff529ee2ddd2cbd2e7b2e7b2ddd2bfe27fff000fffff000f000"
        "2bfe2ddd2e7b2ff72fff2ddd2fff2efbb8f8f0d82481f1fc2bfaffff2aea2bfe2489f0dca8fafbffbbfef9dcfbfeffff"
        "f8502222f0d8e1dc25c5ffff2d952dddf0dc2222f859acd5edcd2222bd9dfc592184f850e8f8fefb2a3affff2e7a2e7b"
        "a8faf8592184fc7bfefbfc59ee7b2d95fc71ecd1fbfeffff2df5ffff2ff52ff7fbffacd5fc7b2c7dfffffdddfffffe73"
        "fffbadcdabeeffff29edffff29ee2fffbbfeedcdfefbffffa9ddfdcdfffffffffc592222f9dcfddd2dddffff2ddd2ddd"
        "f9dc2222fc59fdddfdcd2222fd9dfcd9ae3bad9dfffeffff2cbbffff2cbd2ffffbfebd9dee7bfffffffffd9dac5dfe3b"
        "2d95fc59ffffffff2e7bffff2e7b2efbfffffc592d95fe73fffffcd9fe3badb5"
    ),
    (2, True): (
        "21842400220020c02001ffff200020003000200021842010208820002800299424002222210020002000ffff20002000"
        "2000222220002000200022222000200022002100240120c02000ffff2004200024012000600020102088200028002810"
        "20c0200020c028c02000ffff2000200020c0200020c020d020c820802ddd2dfd2001200020002000f000fffff000f000"
        "21002000200020002000200020002000ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
        "2000200020042000f000fffff000f000200020002400200020002000200020002000200020002080f000fffff000f000"
        "2000200020202000200020042000280030002000240120c02100ffff2000200024012004200220102088200028002810"
        "20002222200020002000ffff200020002004222220012000200022222000200021842000600020c02000ffff24002020"
        "20022001218420102088a0002800299420102000201020d02000ffff2000200020102000201020182ddd200028102810"
        "20882000208820c82000ffff200020802088200020882ddd209820002888addd20002222200020002000ffff20002004"
        "20002222a000200020802222200020102800200028002ddd2000ffff2000200028002000280028102888200028402810"
        "2994200028102dfd2000ffff200020102810200029942810addd280028102994"
    ),
}

