"""Running one training over ranks that an outside launcher (torchrun) started."""
