"""Instance files (TOML), the instance generators and the bundled instances."""

from fairsched.instances.bundled import bundled_names
from fairsched.instances.io import (load_instance, parse_table, problem_from_table, problem_to_table,
                                    read_instance_bytes, read_table, save_instance)

__all__ = ["bundled_names", "load_instance", "parse_table", "problem_from_table", "problem_to_table",
           "read_instance_bytes", "read_table", "save_instance"]
