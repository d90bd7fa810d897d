"""Right answers to every variant of ``scalar_engine`` (``course_utils/checks/lesson01.py``): key -> answer cell."""

ANSWERS = {
    "deep": '''
class Scalar:
    def __init__(self, data, parents=()):
        ### BEGIN SOLUTION
        self.data = float(data)
        self.grad = 0.0
        self._parents = tuple(parents)  # (parent, d self / d parent) for each input
        ### END SOLUTION

    def __repr__(self):
        return f"Scalar(data={self.data}, grad={self.grad})"

    def __add__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data + other.data, [(self, 1.0), (other, 1.0)])
        ### END SOLUTION

    def __radd__(self, other):  # other + self, when other is a number
        ### BEGIN SOLUTION
        return self + other  # + is commutative
        ### END SOLUTION

    def __mul__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data * other.data, [(self, other.data), (other, self.data)])
        ### END SOLUTION

    def __rmul__(self, other):  # other * self, when other is a number
        ### BEGIN SOLUTION
        return self * other
        ### END SOLUTION

    def sin(self):
        ### BEGIN SOLUTION
        return Scalar(math.sin(self.data), [(self, math.cos(self.data))])
        ### END SOLUTION

    def exp(self):
        ### BEGIN SOLUTION
        e = math.exp(self.data)
        return Scalar(e, [(self, e)])  # the derivative of exp is its value
        ### END SOLUTION

    def backward(self):
        ### BEGIN SOLUTION
        # topological order without recursion: an explicit stack of (node, parents done?)
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)  # every parent is already in order
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((parent, False) for parent, _ in node._parents)

        for node in order:
            node.grad = 0.0
        self.grad = 1.0
        for node in order[::-1]:  # users before the nodes they use
            for parent, local in node._parents:
                parent.grad += local * node.grad
        ### END SOLUTION
''',
    "accumulate": '''
class Scalar:
    def __init__(self, data, parents=()):
        ### BEGIN SOLUTION
        self.data = float(data)
        self.grad = 0.0
        self._parents = tuple(parents)  # (parent, d self / d parent) for each input
        ### END SOLUTION

    def __repr__(self):
        return f"Scalar(data={self.data}, grad={self.grad})"

    def __add__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data + other.data, [(self, 1.0), (other, 1.0)])
        ### END SOLUTION

    def __radd__(self, other):  # other + self, when other is a number
        ### BEGIN SOLUTION
        return self + other  # + is commutative
        ### END SOLUTION

    def __mul__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data * other.data, [(self, other.data), (other, self.data)])
        ### END SOLUTION

    def __rmul__(self, other):  # other * self, when other is a number
        ### BEGIN SOLUTION
        return self * other
        ### END SOLUTION

    def sin(self):
        ### BEGIN SOLUTION
        return Scalar(math.sin(self.data), [(self, math.cos(self.data))])
        ### END SOLUTION

    def exp(self):
        ### BEGIN SOLUTION
        e = math.exp(self.data)
        return Scalar(e, [(self, e)])  # the derivative of exp is its value
        ### END SOLUTION

    def backward(self):
        ### BEGIN SOLUTION
        order, seen = [], set()

        def visit(node):
            if id(node) not in seen:
                seen.add(id(node))
                for parent, _ in node._parents:
                    visit(parent)
                order.append(node)

        visit(self)

        for node in order:
            if node._parents:  # interior nodes start afresh; leaves keep what earlier calls left
                node.grad = 0.0
        if self._parents:
            self.grad = 1.0  # the seed (reset above)
        else:
            self.grad += 1.0  # out is a leaf itself: it accumulates too
        for node in reversed(order):
            for parent, local in node._parents:
                parent.grad += node.grad * local
        ### END SOLUTION
''',
    "leaves": '''
class Scalar:
    def __init__(self, data, parents=()):
        ### BEGIN SOLUTION
        self.data = float(data)
        self.grad = 0.0
        self._parents = tuple(parents)  # (parent, d self / d parent) for each input
        ### END SOLUTION

    def __repr__(self):
        return f"Scalar(data={self.data}, grad={self.grad})"

    def __add__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data + other.data, [(self, 1.0), (other, 1.0)])
        ### END SOLUTION

    def __radd__(self, other):  # other + self, when other is a number
        ### BEGIN SOLUTION
        return self + other  # + is commutative
        ### END SOLUTION

    def __mul__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data * other.data, [(self, other.data), (other, self.data)])
        ### END SOLUTION

    def __rmul__(self, other):  # other * self, when other is a number
        ### BEGIN SOLUTION
        return self * other
        ### END SOLUTION

    def sin(self):
        ### BEGIN SOLUTION
        return Scalar(math.sin(self.data), [(self, math.cos(self.data))])
        ### END SOLUTION

    def exp(self):
        ### BEGIN SOLUTION
        e = math.exp(self.data)
        return Scalar(e, [(self, e)])  # the derivative of exp is its value
        ### END SOLUTION

    def backward(self):
        ### BEGIN SOLUTION
        order, seen = [], set()

        def visit(node):
            if id(node) not in seen:
                seen.add(id(node))
                for parent, _ in node._parents:
                    visit(parent)
                order.append(node)

        visit(self)

        adjoint = {id(self): 1.0}  # the interior nodes' gradients live here, not in .grad
        for node in reversed(order):
            g = adjoint.get(id(node), 0.0)
            for parent, local in node._parents:
                adjoint[id(parent)] = adjoint.get(id(parent), 0.0) + g * local
        for node in order:
            if not node._parents:
                node.grad = adjoint.get(id(node), 0.0)
        ### END SOLUTION
''',
    "none": '''
class Scalar:
    def __init__(self, data, parents=()):
        ### BEGIN SOLUTION
        self.data = float(data)
        self.grad = None
        self._parents = tuple(parents)  # (parent, d self / d parent) for each input
        ### END SOLUTION

    def __repr__(self):
        return f"Scalar(data={self.data}, grad={self.grad})"

    def __add__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data + other.data, [(self, 1.0), (other, 1.0)])
        ### END SOLUTION

    def __radd__(self, other):  # other + self, when other is a number
        ### BEGIN SOLUTION
        return self + other  # + is commutative
        ### END SOLUTION

    def __mul__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data * other.data, [(self, other.data), (other, self.data)])
        ### END SOLUTION

    def __rmul__(self, other):  # other * self, when other is a number
        ### BEGIN SOLUTION
        return self * other
        ### END SOLUTION

    def sin(self):
        ### BEGIN SOLUTION
        return Scalar(math.sin(self.data), [(self, math.cos(self.data))])
        ### END SOLUTION

    def exp(self):
        ### BEGIN SOLUTION
        e = math.exp(self.data)
        return Scalar(e, [(self, e)])  # the derivative of exp is its value
        ### END SOLUTION

    def backward(self):
        ### BEGIN SOLUTION
        order, seen = [], set()

        def visit(node):
            if id(node) not in seen:
                seen.add(id(node))
                for parent, _ in node._parents:
                    visit(parent)
                order.append(node)

        visit(self)

        for node in order:
            node.grad = None
        self.grad = 1.0
        for node in reversed(order):
            for parent, local in node._parents:
                parent.grad = (parent.grad or 0.0) + node.grad * local
        ### END SOLUTION
''',
}
