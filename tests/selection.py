"""Which test modules run on every Keras backend.

The TensorFlow pass runs every test. Another backend's pass (the JAX pass runs without
TensorFlow installed) collects, from their paths alone, each layer's test module (the mirror
under ``tests/layers/`` of a module of ``tf_memlayers/layers/``) and the files named here. A
test in them that needs TensorFlow carries the ``tensorflow_only`` marker and is skipped, with
its reason, elsewhere."""

import pathlib

TESTS_DIR = pathlib.Path(__file__).resolve().parent
PACKAGE_DIR = TESTS_DIR.parent / "tf_memlayers"

# The tests of what every layer shares: the test case, the conformance across layers, the
# primitives written with Keras ops, the argument checks and initializers, the backends.
SHARED = (
    "layers/test_layer_conformance.py",
    "ops/test_associative_gru_pallas.py",
    "ops/test_associative_gru_step.py",
    "ops/test_heap.py",
    "ops/test_holographic.py",
    "ops/test_pieces.py",
    "ops/test_precision.py",
    "ops/test_products.py",
    "ops/test_windows.py",
    "test__tensorflow.py",
    "test__validation.py",
    "test_backends.py",
    "test_initializers.py",
    "test_layer_test_case.py",
)

# The tests of what else the package runs without TensorFlow: the cache episodes' callback, the
# loss, the metric and the regularizer, the import, the pages' and docstrings' examples, the
# model builders, `.keras` files between backends and of 0.1 and 0.2, ONNX files on torch,
# Keras's own tests with ours in their place, training on several devices, the GPU run's
# rehearsal, the speed harness.
WITHOUT_TENSORFLOW = (
    "callbacks/test_cache_episodes_callback.py",
    "callbacks/test_cosine_similarity_matrix.py",
    "benchmarks/test_gpu_run.py",
    "benchmarks/test_speed.py",
    "losses/test_sequence_crossentropy.py",
    "metrics/test_perplexity.py",
    "regularizers/test_half_squared_norm.py",
    "layers/test_keras_tests_with_ours.py",
    "models/test_builders_on_every_backend.py",
    "models/test_data_parallel.py",
    "models/test_heap_cache_model.py",
    "test_doc_pages.py",
    "test_docstring_examples.py",
    "test_files_between_backends.py",
    "test_onnx_export.py",
    "test_package_import.py",
    "test_saved_models.py",
)


def mirrored_test_module(module_path):
    """The test module of the package module at ``module_path`` (a path under
    ``tf_memlayers/``, e.g. ``layers/philox_dropout.py``), as a path under ``tests/``
    (``layers/test_philox_dropout.py``)."""
    path = pathlib.PurePosixPath(module_path)
    return (path.parent / f"test_{path.name}").as_posix().removeprefix("./")


def layer_test_modules(package_dir=PACKAGE_DIR, tests_dir=TESTS_DIR):
    """The test modules of the modules of ``tf_memlayers/layers/`` that exist, as sorted
    paths under ``tests/``."""
    package_dir = pathlib.Path(package_dir)
    tests = [
        mirrored_test_module(path.relative_to(package_dir).as_posix())
        for path in sorted((package_dir / "layers").rglob("*.py"))
        if path.name != "__init__.py"
    ]
    return tuple(test for test in tests if (pathlib.Path(tests_dir) / test).is_file())


def backend_neutral_files():
    """The test files that run on every backend, as paths under ``tests/``."""
    return frozenset(SHARED) | frozenset(WITHOUT_TENSORFLOW) | frozenset(layer_test_modules())


def collected(backend, path):
    """Whether the pass on ``backend`` collects ``path`` (a file or folder under ``tests/``):
    on TensorFlow everything; elsewhere every folder and helper module, and of the test
    modules (``test_*.py``) the `backend_neutral_files`."""
    path = pathlib.Path(path)
    if backend == "tensorflow" or not path.name.startswith("test_") or path.suffix != ".py":
        return True
    return path.resolve().relative_to(TESTS_DIR).as_posix() in backend_neutral_files()
