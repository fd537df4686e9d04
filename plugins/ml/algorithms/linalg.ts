import { CholeskyDecomposition, Matrix, solve } from 'ml-matrix'

/**
 * Solves A x = b for a small symmetric positive (semi-)definite A given as its packed rows:
 * Cholesky when A is positive definite, else a least-squares solve (ml-matrix's QR), which a
 * singular Hessian or Gram matrix (a constant or duplicated feature) needs.
 */
export function solveSpd(a: number[][], b: number[]): number[] {
  const A = new Matrix(a)
  const B = Matrix.columnVector(b)
  const chol = new CholeskyDecomposition(A)
  const x = chol.isPositiveDefinite() ? chol.solve(B) : solve(A, B, true)
  return x.getColumn(0)
}
