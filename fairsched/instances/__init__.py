"""Instance files (TOML), the instance generators and the bundled instances."""

from fairsched.instances.io import (load_instance, problem_from_table, problem_to_table, read_table,
                                    save_instance)

__all__ = ["load_instance", "problem_from_table", "problem_to_table", "read_table", "save_instance"]
