"""Make dashboard/web/static/fonts/KernelscopeCJK-Regular.woff2: a subset of Noto Sans CJK SC Regular
(SIL Open Font License 1.1, https://github.com/googlefonts/noto-cjk; the licence is
dashboard/web/static/fonts/OFL.txt) with the 3,755 most common Chinese characters (GB 2312 level 1),
every CJK character in the project's own text, CJK punctuation and full-width forms, so Chinese text
(the Claims page) renders where no CJK font is installed.

    pip install fonttools brotli
    apt-get download fonts-noto-cjk && dpkg -x fonts-noto-cjk_*.deb noto
    python tools/make_cjk_font.py noto/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "dashboard" / "web" / "static" / "fonts" / "KernelscopeCJK-Regular.woff2"


def gb2312_level1() -> str:
    """The 3,755 hanzi of GB 2312 level 1 (rows 16-55), decoded from their GB 2312 byte pairs."""
    out = []
    for hi in range(0xB0, 0xD8):
        for lo in range(0xA1, 0xFF):
            try:
                out.append(bytes([hi, lo]).decode("gb2312"))
            except UnicodeDecodeError:
                continue
    return "".join(out)


def project_cjk() -> str:
    chars = set()
    for p in (
        list(REPO.glob("analyzers/**/*.py"))
        + list(REPO.glob("dashboard/**/*.py"))
        + [REPO / "README.md"]
    ):
        chars |= set(
            re.findall(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]", p.read_text(encoding="utf-8"))
        )
    return "".join(sorted(chars))


def main(src: str) -> None:
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    ttc = TTCollection(src)
    # the collection's Simplified Chinese face
    font = next(f for f in ttc.fonts if "SC" in f["name"].getDebugName(1))
    text = (
        gb2312_level1()
        + project_cjk()
        + "".join(chr(c) for c in range(0x3000, 0x3040))
        + "".join(chr(c) for c in range(0xFF01, 0xFF5F))
    )
    opts = subset.Options()
    opts.flavor = "woff2"
    opts.layout_features = ["*"]
    opts.name_IDs = ["*"]
    opts.notdef_outline = True
    sub = subset.Subsetter(opts)
    sub.populate(text=text)
    sub.subset(font)
    name = font["name"]
    for rec in name.names:
        if rec.nameID in (1, 4, 16):
            rec.string = "Kernelscope CJK"
        elif rec.nameID == 6:
            rec.string = "KernelscopeCJK-Regular"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = "woff2"
    font.save(OUT)
    print(f"{OUT}: {OUT.stat().st_size / 1e6:.2f} MB, {len(set(text))} characters")


if __name__ == "__main__":
    main(sys.argv[1])
