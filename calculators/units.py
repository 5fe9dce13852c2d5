"""Binary byte units: one definition for every module that converts bytes to MiB or GiB (GiB = 2^30 bytes, the
unit engines print as "GiB", and SGLang's logs as "GB")."""

MIB = 2**20
GIB = 2**30
