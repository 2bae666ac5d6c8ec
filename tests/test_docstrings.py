"""The public estimators and functions document every parameter, in the signature's order.

Each public class's ``__doc__`` (some are assembled from shared pieces such as
rbcd.models._PARAMS_DOC; the assembled text is what is read here) has a numpydoc
"Parameters" section, and the names of its entries (``name : ...``, or ``a, b : ...``
for names documented together) are exactly the ``__init__`` parameters, first mentioned
in the order of the signature. The public functions are held to the same rule, and those
that return something also have a "Returns" section.
"""
import inspect
import re

import pytest

import rbcd
from rbcd import model_selection, related

# a section's underline, and an entry line of a Parameters section: at the section's own
# indentation, one name or several separated by commas (``*args`` / ``**kwargs`` spelled
# with their stars), then " :" and the type, or nothing after the name(s)
_UNDERLINE = re.compile(r"^-{3,}$")
_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::|$)")


def doc_section(doc, title):
    """The lines of section ``title`` of a numpydoc docstring (after its underline, up to
    the next titled section), or None where the docstring has no such section."""
    lines = inspect.cleandoc(doc or "").splitlines()
    for k in range(len(lines) - 1):
        if lines[k].strip() == title and _UNDERLINE.match(lines[k + 1].strip()):
            body = lines[k + 2:]
            end = len(body)
            for j in range(len(body) - 1):
                if body[j].strip() and _UNDERLINE.match(body[j + 1].strip()):
                    end = j
                    break
            return body[:end]
    return None


def documented_names(section_lines):
    """The parameter names that the section's entries document, in their order (a name
    documented twice appears twice)."""
    names = []
    for line in section_lines:
        if not line or line[0].isspace():   # a description line, or blank
            continue
        m = _ENTRY.match(line)
        if m:
            names += [name.strip().lstrip("*") for name in m.group(1).split(",")]
    return names


def signature_names(obj):
    func = obj.__init__ if inspect.isclass(obj) else obj
    return [p.name for p in inspect.signature(func).parameters.values() if p.name != "self"]


def check_parameters(obj):
    """A list of what is wrong with obj's Parameters section against its signature."""
    name = obj.__name__
    section = doc_section(obj.__doc__, "Parameters")
    if section is None:
        return [f"{name}: no 'Parameters' section"]
    documented = documented_names(section)
    expected = signature_names(obj)
    problems = []
    missing = [p for p in expected if p not in documented]
    if missing:
        problems.append(f"{name}: parameters not documented: {missing}")
    unknown = [p for p in documented if p not in expected]
    if unknown:
        problems.append(f"{name}: documented names that are not parameters: {unknown}")
    first_seen = [p for p in dict.fromkeys(documented) if p in expected]
    in_signature_order = [p for p in expected if p in first_seen]
    if first_seen != in_signature_order:
        problems.append(f"{name}: documented in the order {first_seen}, the signature's "
                        f"is {in_signature_order}")
    return problems


def _public_classes():
    classes = {}
    for name in rbcd.__all__:
        obj = getattr(rbcd, name)
        if inspect.isclass(obj) and not issubclass(obj, Warning):
            classes[name] = obj
    for name in ("RBClassifierCV", "RBRegressorCV"):
        classes.setdefault(name, getattr(model_selection, name))
    for name in related.__all__:
        classes.setdefault(name, getattr(related, name))
    return [classes[k] for k in sorted(classes)]


PUBLIC_CLASSES = _public_classes()
PUBLIC_FUNCTIONS = [getattr(rbcd, name) for name in rbcd.__all__
                    if inspect.isfunction(getattr(rbcd, name))]


def test_the_lists_cover_the_public_api():
    names = {c.__name__ for c in PUBLIC_CLASSES}
    assert {"RBClassifier", "RBRegressor", "RBClassifierCV", "RBRegressorCV", "RidgeCG",
            "RidgeCGClassifier", "CDClassifier", "CDRegressor", "RandomBinning",
            "RandomFourier", "SparseRandomFeatures",
            "DoublyStochasticKernelClassifier"} <= names
    assert {f.__name__ for f in PUBLIC_FUNCTIONS} >= {"alpha_max", "cd_path",
                                                      "median_l1_distance", "show_config"}


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_estimator_parameters_documented_in_signature_order(cls):
    assert check_parameters(cls) == []


@pytest.mark.parametrize("func", PUBLIC_FUNCTIONS, ids=lambda f: f.__name__)
def test_function_parameters_documented_in_signature_order(func):
    assert check_parameters(func) == []
    assert doc_section(func.__doc__, "Returns") is not None, (
        f"{func.__name__}: no 'Returns' section")


def test_the_parser_sees_order_and_omissions():
    """check_parameters on made-up docstrings: the checks above can fail."""
    def f(alpha, solver="cg", n_jobs=None, **params):
        pass

    f.__doc__ = """Summary.

    Parameters
    ----------
    alpha : float
        The penalty.
    solver, n_jobs : str and int
    **params
        The rest.

    Returns
    -------
    None
    """
    assert check_parameters(f) == []
    f.__doc__ = """Summary.

        Parameters
        ----------
        solver : str
        alpha : float
            A description line at the entries' indentation plus four: not an entry.
        params : dict
        tol : float

        Attributes
        ----------
        n_jobs : int
        """
    problems = check_parameters(f)
    assert len(problems) == 3, problems
    assert "not documented: ['n_jobs']" in problems[0]
    assert "not parameters: ['tol']" in problems[1]
    assert "the order ['solver', 'alpha', 'params']" in problems[2]
    f.__doc__ = "Summary without sections."
    assert check_parameters(f) == ["f: no 'Parameters' section"]


@pytest.mark.parametrize("name", ["RBRegressor", "RBClassifier"])
def test_model_attributes_documented(name):
    """Every public fitted attribute of the models (set by fit, or a property such as
    ``alpha_``) has an entry in the Attributes section."""
    import numpy as np

    cls = getattr(rbcd, name)
    rng = np.random.default_rng(0)
    X = rng.random((60, 3))
    y = (X[:, 0] > 0.5).astype(int) if name == "RBClassifier" else X[:, 0]
    est = cls(n_grids=8, random_state=0, n_jobs=1).fit(X, y)
    fitted = {a for a in vars(est) if a.endswith("_") and not a.startswith("_")}
    fitted |= {a for a, v in inspect.getmembers(cls, lambda v: isinstance(v, property))
               if a.endswith("_") and not a.startswith("_") and hasattr(est, a)}
    section = doc_section(cls.__doc__, "Attributes")
    assert section is not None
    documented = set(documented_names(section))
    assert {"alpha_", "coef_", "intercept_", "n_iter_", "fit_time_"} <= fitted
    assert sorted(fitted - documented) == []
