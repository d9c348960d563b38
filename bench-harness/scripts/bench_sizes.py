"""Byte sizes with k/m/g suffixes (powers of 1024), for the bench scripts'
arguments: size("256k") == 262144."""


def size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)
