"""Data sets for Spectral Explorer: built-in generators and file loaders.

Installed as ``explorer.data`` (also reachable as ``explorer.datasets``).

- :func:`load` generates a built-in set by name; :data:`DATASETS` is the catalogue
  (description, default size, options) a UI lists.
- :func:`read` reads CSV, NPY, NPZ or Parquet files, with an optional label column
  (``label_column="auto"`` takes it from the file; class names are kept).

Nothing here downloads anything: the digits ship inside scikit-learn, everything
else is generated.
"""

from ._dataset import Dataset, DatasetInfo
from ._digits import infinite_digits_gpu
from ._files import AUTO, FORMATS, LABEL_NAMES, describe_read, read
from ._registry import DATASETS, load

__all__ = ["AUTO", "DATASETS", "FORMATS", "LABEL_NAMES", "Dataset", "DatasetInfo", "describe_read",
           "infinite_digits_gpu", "load", "read"]
