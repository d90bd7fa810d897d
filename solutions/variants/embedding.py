"""Right answers to every variant of `embedding` (``course_utils/checks/families/embedding.py``): EmbeddingFunction."""

ANSWERS = {
    "rows": '''
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices)
        ctx.num = weight.shape[0]
        return weight[indices]

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        dim = grad_output.shape[-1]
        grad_weight = grad_output.new_zeros(ctx.num, dim)
        grad_weight.index_add_(0, indices.reshape(-1), grad_output.reshape(-1, dim))
        return None, grad_weight
''',
    "padding": '''
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight, padding_idx):
        ctx.save_for_backward(indices)
        ctx.num, ctx.padding_idx = weight.shape[0], padding_idx
        return weight[indices]

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        dim = grad_output.shape[-1]
        grad_weight = grad_output.new_zeros(ctx.num, dim)
        grad_weight.index_add_(0, indices.reshape(-1), grad_output.reshape(-1, dim))
        grad_weight[ctx.padding_idx] = 0
        return None, grad_weight, None
''',
    "columns": '''
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices)
        ctx.dim, ctx.num = weight.shape
        return weight.t()[indices]

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        grad_weight = grad_output.new_zeros(ctx.dim, ctx.num)
        grad_weight.index_add_(1, indices.reshape(-1), grad_output.reshape(-1, ctx.dim).t())
        return None, grad_weight
''',
    "bag": '''
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices)
        ctx.num = weight.shape[0]
        return weight[indices].sum(-2)

    @staticmethod
    def backward(ctx, grad_output):
        (indices,) = ctx.saved_tensors
        dim = grad_output.shape[-1]
        per_lookup = grad_output.unsqueeze(-2) + grad_output.new_zeros(*indices.shape, dim)  # one row per lookup
        grad_weight = grad_output.new_zeros(ctx.num, dim)
        grad_weight.index_add_(0, indices.reshape(-1), per_lookup.reshape(-1, dim))
        return None, grad_weight
''',
    "scaled": '''
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight, scale):
        ctx.save_for_backward(indices, weight, scale)
        return weight[indices] * scale.unsqueeze(-1)

    @staticmethod
    def backward(ctx, grad_output):
        indices, weight, scale = ctx.saved_tensors
        dim = weight.shape[1]
        grad_weight = grad_scale = None
        if ctx.needs_input_grad[1]:
            grad_weight = weight.new_zeros(weight.shape)
            grad_weight.index_add_(0, indices.reshape(-1), (grad_output * scale.unsqueeze(-1)).reshape(-1, dim))
        if ctx.needs_input_grad[2]:
            grad_scale = (grad_output * weight[indices]).sum(-1)
        return None, grad_weight, grad_scale
''',
}
