// Package bound computes a lower bound on the unallocated GPU % that any scheduler can reach
// with a given set of pods on a given cluster: the distance to the optimum that the replay's
// figures (unallocated GPU % at 100 % arrived workload) are measured against.
//
// The bound knows the future and may place the pods in any order or leave any out. It is
// the optimum of a linear program (gonum's optimize/convex/lp Simplex) that relaxes the
// integer placement problem: per class of identical nodes, the pods' GPU, cpu and memory
// fit the class's total; a pod goes only to nodes whose model its gpu_spec allows and that
// have at least its num_gpu cards. The relaxation is then tightened with cuts from
// dual-feasible functions (dff.go), applied per card (the pods' per-card GPU-milli) and per
// node (GPU, cpu, memory), added while the current optimum violates them (cuts.go).
//
// Every constraint and cut holds for every integer placement, so the program's optimum is
// at least the best allocation any scheduler can reach, and 100 % minus it (in % of the
// cluster's GPU capacity) is at most the least unallocated GPU %.
//
// Sources: S. P. Fekete and J. Schepers, "New classes of fast lower bounds for bin packing
// problems", Math. Program. 91 (2001) 11–31 (the functions u^(k) and U^(ε), and their
// composition);
// F. Clautiaux, C. Alves, J. M. Valério de Carvalho, "A survey of dual-feasible and
// superadditive functions", Ann. Oper. Res. 179 (2010) 317–342 (their use as valid
// inequalities of a relaxation).
package bound
