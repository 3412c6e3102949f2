"""Helpers the tests import: runs and stores, hand-made ablations, the MoLS probe, throwaway servers."""
